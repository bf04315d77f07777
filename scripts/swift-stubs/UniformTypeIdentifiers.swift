// Apple's UniformTypeIdentifiers (iOS 14), as far as used. See README.md for the rules.
@_exported import DarwinFoundation

public struct UTType: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
  public init?(_ identifier: String) { fatalError() }
  public init?(filenameExtension: String) { fatalError() }
  public var identifier: String { fatalError() }
  public var preferredFilenameExtension: String? { fatalError() }
  public var description: String { fatalError() }
  public var debugDescription: String { fatalError() }
  public func conforms(to type: UTType) -> Bool { fatalError() }
}

extension UTType {
  public static let item: UTType = { fatalError() }()
  public static let content: UTType = { fatalError() }()
  public static let folder: UTType = { fatalError() }()
  public static let directory: UTType = { fatalError() }()
  public static let data: UTType = { fatalError() }()
  public static let text: UTType = { fatalError() }()
  public static let plainText: UTType = { fatalError() }()
  public static let pdf: UTType = { fatalError() }()
  public static let image: UTType = { fatalError() }()
}
