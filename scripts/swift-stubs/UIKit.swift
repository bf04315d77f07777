// Apple's UIKit, as far as the iOS plugin and Tauri's iOS API use it. See README.md for the
// rules: UIKit's classes and protocols are @MainActor, as Objective-C declarations they are
// @preconcurrency, and Objective-C `optional` requirements have empty default implementations.
@_exported import DarwinFoundation
@_exported import UniformTypeIdentifiers

@preconcurrency @MainActor
open class UIResponder: NSObject {
  public override init() { fatalError() }
}

@preconcurrency @MainActor
open class UIView: UIResponder {
  open var center: CGPoint
  open var frame: CGRect
  open var bounds: CGRect
  public init(frame: CGRect) { fatalError() }
}

// NS_OPTIONS(NSUInteger, UIPopoverArrowDirection)
public struct UIPopoverArrowDirection: OptionSet, Sendable {
  public let rawValue: UInt
  public init(rawValue: UInt) { self.rawValue = rawValue }
  public static let up = UIPopoverArrowDirection(rawValue: 1 << 0)
  public static let down = UIPopoverArrowDirection(rawValue: 1 << 1)
  public static let left = UIPopoverArrowDirection(rawValue: 1 << 2)
  public static let right = UIPopoverArrowDirection(rawValue: 1 << 3)
  public static let any = UIPopoverArrowDirection(rawValue: 0b1111)
  public static let unknown = UIPopoverArrowDirection(rawValue: UInt.max)
}

@preconcurrency @MainActor
open class UIPresentationController: NSObject {}

@preconcurrency @MainActor
open class UIPopoverPresentationController: UIPresentationController {
  open var permittedArrowDirections: UIPopoverArrowDirection
  open var sourceView: UIView?
  open var sourceRect: CGRect
  public override init() { fatalError() }
}

@preconcurrency @MainActor
open class UIViewController: UIResponder {
  public init(nibName nibNameOrNil: String?, bundle nibBundleOrNil: Bundle?) { fatalError() }
  // null_resettable in Objective-C
  open var view: UIView!
  open var popoverPresentationController: UIPopoverPresentationController? { fatalError() }
  open var presentedViewController: UIViewController? { fatalError() }
  open func present(
    _ viewControllerToPresent: UIViewController, animated flag: Bool,
    completion: (() -> Void)? = nil
  ) { fatalError() }
  open func dismiss(animated flag: Bool, completion: (() -> Void)? = nil) {
    fatalError()
  }
}

// MARK: UIApplication

// typedef NSUInteger UIBackgroundTaskIdentifier NS_TYPED_ENUM
public struct UIBackgroundTaskIdentifier: RawRepresentable, Hashable, Sendable {
  public init(rawValue: Int) { self.rawValue = rawValue }
  public let rawValue: Int
  public static let invalid = UIBackgroundTaskIdentifier(rawValue: 0)
}

@preconcurrency @MainActor
open class UIApplication: UIResponder {
  open class var shared: UIApplication { fatalError() }

  // the expiration handler is called on the main thread; whether the SDK says @MainActor is
  // not certain, so it is only @Sendable here (the stricter form, see README.md)
  @discardableResult
  open func beginBackgroundTask(
    withName taskName: String?, expirationHandler handler: (@Sendable () -> Void)? = nil
  ) -> UIBackgroundTaskIdentifier { fatalError() }
  @discardableResult
  open func beginBackgroundTask(expirationHandler handler: (@Sendable () -> Void)? = nil)
    -> UIBackgroundTaskIdentifier
  { fatalError() }
  open func endBackgroundTask(_ identifier: UIBackgroundTaskIdentifier) { fatalError() }

  // UIKIT_EXTERN NSNotificationName const …: global constants, not isolated
  nonisolated public static let didEnterBackgroundNotification = NSNotification.Name(
    "UIApplicationDidEnterBackgroundNotification")
  nonisolated public static let willEnterForegroundNotification = NSNotification.Name(
    "UIApplicationWillEnterForegroundNotification")
  nonisolated public static let didFinishLaunchingNotification = NSNotification.Name(
    "UIApplicationDidFinishLaunchingNotification")
  nonisolated public static let didBecomeActiveNotification = NSNotification.Name(
    "UIApplicationDidBecomeActiveNotification")
  nonisolated public static let willResignActiveNotification = NSNotification.Name(
    "UIApplicationWillResignActiveNotification")
  nonisolated public static let didReceiveMemoryWarningNotification = NSNotification.Name(
    "UIApplicationDidReceiveMemoryWarningNotification")
  nonisolated public static let willTerminateNotification = NSNotification.Name(
    "UIApplicationWillTerminateNotification")
}

// MARK: the document picker (UIDocumentPickerViewController.h)

@preconcurrency @MainActor
public protocol UIDocumentPickerDelegate: NSObjectProtocol {
  // all three are `optional` in Objective-C
  func documentPicker(
    _ controller: UIDocumentPickerViewController, didPickDocumentsAt urls: [URL])
  func documentPickerWasCancelled(_ controller: UIDocumentPickerViewController)
  func documentPicker(_ controller: UIDocumentPickerViewController, didPickDocumentAt url: URL)
}

extension UIDocumentPickerDelegate {
  public func documentPicker(
    _ controller: UIDocumentPickerViewController, didPickDocumentsAt urls: [URL]
  ) {}
  public func documentPickerWasCancelled(_ controller: UIDocumentPickerViewController) {}
  public func documentPicker(
    _ controller: UIDocumentPickerViewController, didPickDocumentAt url: URL
  ) {}
}

@preconcurrency @MainActor
open class UIDocumentPickerViewController: UIViewController {
  public init(forOpeningContentTypes contentTypes: [UTType], asCopy: Bool) { fatalError() }
  public convenience init(forOpeningContentTypes contentTypes: [UTType]) { fatalError() }
  public init(forExportingURLs urls: [URL], asCopy: Bool) { fatalError() }
  public convenience init(forExportingURLs urls: [URL]) { fatalError() }
  weak open var delegate: (any UIDocumentPickerDelegate)?
  open var allowsMultipleSelection: Bool
  open var shouldShowFileExtensions: Bool
  open var directoryURL: URL?
}
