// The Swift side of the swift-rs crate (its Swift package is not in the crate's sources), as
// far as Tauri's iOS API uses it: the strings Tauri's C entry points take.
import Foundation

open class SRData: NSObject {}

public class SRString: SRData {
  public init(_ string: String) { fatalError() }
  public func toString() -> String { fatalError() }
}
