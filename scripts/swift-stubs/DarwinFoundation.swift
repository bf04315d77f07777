// What Foundation declares on Apple platforms but not in swift-corelibs-foundation (Linux),
// as far as the iOS plugin and Tauri's iOS API use it. See README.md for the rules.
@_exported import Darwin  // Foundation re-exports the C library on Apple platforms
@_exported import Foundation

// MARK: security-scoped URLs and bookmarks (NSURL.h, Foundation's URL overlay)

extension URL {
  public typealias BookmarkCreationOptions = NSURLBookmarkCreationOptions
  public typealias BookmarkResolutionOptions = NSURLBookmarkResolutionOptions

  public func startAccessingSecurityScopedResource() -> Bool { fatalError() }
  public func stopAccessingSecurityScopedResource() { fatalError() }

  public func bookmarkData(
    options: URL.BookmarkCreationOptions = [],
    includingResourceValuesForKeys keys: Set<URLResourceKey>? = nil,
    relativeTo url: URL? = nil
  ) throws -> Data { fatalError() }

  public init(
    resolvingBookmarkData data: Data, options: URL.BookmarkResolutionOptions = [],
    relativeTo url: URL? = nil, bookmarkDataIsStale: inout Bool
  ) throws { fatalError() }
}

// NS_OPTIONS(NSUInteger, NSURLBookmarkCreationOptions), iOS's members
public struct NSURLBookmarkCreationOptions: OptionSet, Sendable {
  public let rawValue: UInt
  public init(rawValue: UInt) { self.rawValue = rawValue }
  public static let minimalBookmark = NSURLBookmarkCreationOptions(rawValue: 1 << 9)
  public static let suitableForBookmarkFile = NSURLBookmarkCreationOptions(rawValue: 1 << 10)
  public static let withoutImplicitSecurityScope = NSURLBookmarkCreationOptions(rawValue: 1 << 29)
}

// NS_OPTIONS(NSUInteger, NSURLBookmarkResolutionOptions), iOS's members
public struct NSURLBookmarkResolutionOptions: OptionSet, Sendable {
  public let rawValue: UInt
  public init(rawValue: UInt) { self.rawValue = rawValue }
  public static let withoutUI = NSURLBookmarkResolutionOptions(rawValue: 1 << 8)
  public static let withoutMounting = NSURLBookmarkResolutionOptions(rawValue: 1 << 9)
  public static let withoutImplicitStartAccessing = NSURLBookmarkResolutionOptions(rawValue: 1 << 15)
}

// MARK: thermal state (NSProcessInfo.h)

extension FileManager {
  /// iCloud Drive: the app's ubiquity container (nil: iCloud is off or the user signed out).
  public func url(forUbiquityContainerIdentifier containerIdentifier: String?) -> URL? {
    fatalError()
  }
}

extension ProcessInfo {
  // NS_ENUM(NSInteger, NSProcessInfoThermalState): not frozen (see README.md)
  public enum ThermalState: Int, @unchecked Sendable {
    case nominal = 0
    case fair = 1
    case serious = 2
    case critical = 3
  }

  public var thermalState: ProcessInfo.ThermalState { fatalError() }

  public static let thermalStateDidChangeNotification = NSNotification.Name(
    "NSProcessInfoThermalStateDidChangeNotification")
}

// MARK: the Objective-C runtime, as Tauri's PluginManager calls it (objc/NSObject.h)

public struct Selector: Hashable, Sendable {
  public init(_ str: String) {}
}

// Swift imports Objective-C's IMP (a C function pointer of unknown type) as an opaque pointer.
public typealias IMP = OpaquePointer

// Objective-C methods: Swift imports them with discardable results.
extension NSObject {
  @discardableResult
  public func responds(to aSelector: Selector!) -> Bool { fatalError() }
  @discardableResult
  public func method(for aSelector: Selector!) -> IMP! { fatalError() }
  @discardableResult
  public func perform(_ aSelector: Selector!, with object: Any!) -> Unmanaged<AnyObject>! {
    fatalError()
  }
}
