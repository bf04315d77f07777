// The Swift overlay of Apple's `os` module (os.log's Swift API and os.Logger), over the Clang
// module in os/module.modulemap. See README.md for the rules.
import Foundation  // the Clang module `os` is imported by -import-underlying-module

// os_log_t, an Objective-C object; thread-safe
public final class OSLog: NSObject, @unchecked Sendable {
  public init(subsystem: String, category: String) { fatalError() }
  public static let disabled: OSLog = { fatalError() }()
  public static let `default`: OSLog = { fatalError() }()
}

public struct OSLogType: Equatable, RawRepresentable, Sendable {
  public let rawValue: UInt8
  public init(_ type: UInt8) { rawValue = type }
  public init(rawValue: UInt8) { self.rawValue = rawValue }
  public static let `default` = OSLogType(0x00)
  public static let info = OSLogType(0x01)
  public static let debug = OSLogType(0x02)
  public static let error = OSLogType(0x10)
  public static let fault = OSLogType(0x11)
}

public func os_log(
  _ message: StaticString, dso: UnsafeRawPointer? = #dsohandle, log: OSLog = .default,
  type: OSLogType = .default, _ args: any CVarArg...
) { fatalError() }

public func os_log(
  _ type: OSLogType, dso: UnsafeRawPointer = #dsohandle, log: OSLog = .default,
  _ message: StaticString, _ args: any CVarArg...
) { fatalError() }

// os.Logger (iOS 14): its name is also Tauri's `Logger`, so a file importing both must say
// which one it means, as on a Mac.
public struct OSLogMessage: ExpressibleByStringInterpolation, Sendable {
  public init(stringLiteral value: String) {}
  public init(stringInterpolation: DefaultStringInterpolation) {}
}

public struct Logger: @unchecked Sendable {
  public init() {}
  public init(subsystem: String, category: String) {}
  public init(_ logObj: OSLog) {}
  public func log(_ message: OSLogMessage) {}
  public func log(level: OSLogType, _ message: OSLogMessage) {}
  public func debug(_ message: OSLogMessage) {}
  public func info(_ message: OSLogMessage) {}
  public func notice(_ message: OSLogMessage) {}
  public func warning(_ message: OSLogMessage) {}
  public func error(_ message: OSLogMessage) {}
  public func fault(_ message: OSLogMessage) {}
}
