// Apple's WebKit, as far as Tauri's iOS API and the plugin use it (only the type of the
// webview). See README.md for the rules.
@_exported import UIKit

@preconcurrency @MainActor
open class WKWebView: UIView {
  open var url: URL? { fatalError() }
  open var isLoading: Bool { fatalError() }
}
