// Apple's EventKit, as far as the iOS plugin uses it. See README.md for the rules. EventKit's
// classes are not @MainActor and not Sendable; its Objective-C methods' results are
// discardable; the access completion handler is called on an
// arbitrary queue, so it is @Sendable (the stricter form).
@_exported import DarwinFoundation

public typealias EKEventStoreRequestAccessCompletionHandler = @Sendable (Bool, (any Error)?) ->
  Void

open class EKObject: NSObject {}

open class EKCalendar: EKObject {
  open var title: String
  open var calendarIdentifier: String { fatalError() }
  open var allowsContentModifications: Bool { fatalError() }
  public override init() { fatalError() }
}

open class EKAlarm: EKObject {
  public convenience init(absoluteDate date: Date) { fatalError() }
  public convenience init(relativeOffset offset: TimeInterval) { fatalError() }
  open var absoluteDate: Date?
  open var relativeOffset: TimeInterval = 0
}

open class EKCalendarItem: EKObject {
  // null_unspecified / null_resettable in Objective-C
  open var calendar: EKCalendar!
  open var title: String!
  open var notes: String?
  open var calendarItemIdentifier: String { fatalError() }
  open var alarms: [EKAlarm]?
  open func addAlarm(_ alarm: EKAlarm) { fatalError() }
  open func removeAlarm(_ alarm: EKAlarm) { fatalError() }
  public override init() { fatalError() }
}

open class EKReminder: EKCalendarItem {
  public convenience init(eventStore: EKEventStore) { fatalError() }
  open var startDateComponents: DateComponents?
  open var dueDateComponents: DateComponents?
  open var isCompleted: Bool = false
  open var completionDate: Date?
  open var priority: Int = 0
}

open class EKEventStore: NSObject {
  public override init() { fatalError() }
  // iOS 17
  open func requestFullAccessToReminders(
    completion: @escaping EKEventStoreRequestAccessCompletionHandler
  ) { fatalError() }
  open func requestFullAccessToReminders() async throws -> Bool { fatalError() }
  @discardableResult
  open func defaultCalendarForNewReminders() -> EKCalendar? { fatalError() }
  open func save(_ reminder: EKReminder, commit: Bool) throws { fatalError() }
  open func remove(_ reminder: EKReminder, commit: Bool) throws { fatalError() }
  open func commit() throws { fatalError() }
  @discardableResult
  open func calendarItem(withIdentifier identifier: String) -> EKCalendarItem? { fatalError() }
}
