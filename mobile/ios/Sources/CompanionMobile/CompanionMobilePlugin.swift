// Companion's iOS side: it observes what iOS tells the app and asks iOS for what the Rust side
// needs. It decides nothing: every event goes to Rust (mobile/src/events.rs) on one channel,
// and every call comes from Rust (mobile/src/mobile.rs). Kept small. Type-checked on Linux in
// Swift 6 mode against Tauri's iOS API and stand-ins for Apple's frameworks
// (scripts/check-swift); built and run only on a Mac.
//
// Threads: commands run on Tauri's "ipc" queue. Everything that holds state or talks to UIKit
// is `MainSide`, on the main actor; a command hops there and answers from there. Rust never
// calls in from the main thread, so a command may wait for the main queue before it answers
// (the picker, EventKit's prompt). Every `Invoke` is answered exactly once, on every path.
//
// `@preconcurrency import Tauri`: Tauri's Swift API predates Swift's concurrency checking (it
// is built in Swift 5 mode and declares nothing Sendable), yet it is made to cross queues:
// Tauri calls commands on its "ipc" queue, and an `Invoke` (immutable, answered through a
// callback into Rust) or a `Channel` may be answered or used from any thread.

import EventKit
import Foundation
@preconcurrency import Tauri
import UIKit
import UniformTypeIdentifiers
import WebKit
import os

struct EventHandlerArgs: Decodable { let handler: Channel }
struct TaskArgs: Decodable { let task: UInt64 }
struct BookmarkArgs: Decodable { let bookmark: String }
struct ReminderArgs: Decodable {
  let title: String
  let dueMs: Int64
}
struct FolderArgs: Decodable { let path: String }

// What Rust reads as `MobileEvent`: serde's adjacently tagged form, {"event": …, "data": …}.
struct Event<Payload: Encodable>: Encodable {
  let event: String
  let data: Payload?
}
struct NoPayload: Encodable {}
struct TaskPayload: Encodable { let task: UInt64? }
struct MemoryPayload: Encodable { let availableBytes: UInt64? }
struct ThermalPayload: Encodable { let state: String }

final class CompanionMobilePlugin: Plugin {
  private let main = MainSide()

  // Tauri calls it on the main thread, but declares it nonisolated: hop, rather than assume.
  @objc public override func load(webview: WKWebView) {
    Task { @MainActor [main] in main.observeApp() }
  }

  // Called from Rust only (not reachable from the webview).
  @objc public func setEventHandler(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(EventHandlerArgs.self)
    Task { @MainActor [main] in main.handler = args.handler }
    invoke.resolve()
  }

  @objc public func endBackgroundTask(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(TaskArgs.self)
    Task { @MainActor [main] in main.endTask(args.task) }
    invoke.resolve()
  }

  @objc public func pickFolder(_ invoke: Invoke) {
    let manager = self.manager
    Task { @MainActor [main] in main.pickFolder(invoke, over: manager.viewController) }
  }

  @objc public func resolveBookmark(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(BookmarkArgs.self)
    guard let data = Data(base64Encoded: args.bookmark) else {
      invoke.reject("not a bookmark", code: "revoked")
      return
    }
    Task { @MainActor [main] in main.resolveBookmark(data, invoke) }
  }

  @objc public func createReminder(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(ReminderArgs.self)
    Task { @MainActor [main] in main.createReminder(args, invoke) }
  }

  @objc public func protectStorage(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(FolderArgs.self)
    let manager = FileManager.default
    let folder = URL(fileURLWithPath: args.path, isDirectory: true)
    do {
      try manager.createDirectory(at: folder, withIntermediateDirectories: true)
      // Apple: set it again after every save, some file operations reset it
      var items = [folder]
      items += try manager.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
      for var item in items {
        var values = URLResourceValues()
        values.isExcludedFromBackup = true
        try item.setResourceValues(values)
        try manager.setAttributes(
          [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication],
          ofItemAtPath: item.path)
      }
      invoke.resolve()
    } catch {
      invoke.reject(error.localizedDescription)
    }
  }

  /// The app's iCloud Drive folder (its ubiquity container's Documents), made when missing;
  /// `path` nil when iCloud Drive is off or the user is signed out. Apple: not on the main
  /// thread (it may take a while the first time); commands arrive on Tauri's own queue.
  @objc public func ubiquityContainer(_ invoke: Invoke) {
    let manager = FileManager.default
    guard let container = manager.url(forUbiquityContainerIdentifier: nil) else {
      invoke.resolve(["path": NSNull()])
      return
    }
    let documents = container.appendingPathComponent("Documents", isDirectory: true)
    do {
      try manager.createDirectory(at: documents, withIntermediateDirectories: true)
      invoke.resolve(["path": documents.path])
    } catch {
      invoke.reject(error.localizedDescription)
    }
  }
}

/// The plugin's state and everything UIKit and EventKit call back, on the main actor.
@MainActor
final class MainSide: NSObject, UIDocumentPickerDelegate {
  var handler: Channel?
  private var observers: [any NSObjectProtocol] = []
  private var backgroundTasks: [UInt64: UIBackgroundTaskIdentifier] = [:]
  // the folder pick under way; a second waits for none (see pickFolder)
  private var picking: Invoke?
  private let reminders = EKEventStore()
  // folders whose security scope is open, by path (each is opened once)
  private var accessing: [String: URL] = [:]

  // the plugin is made off the main actor; nothing here needs the main actor to start
  nonisolated override init() {
    super.init()
  }

  func observeApp() {
    observe(UIApplication.willResignActiveNotification) { [weak self] in
      self?.send(Event<NoPayload>(event: "willResignActive", data: nil))
    }
    observe(UIApplication.didEnterBackgroundNotification) { [weak self] in
      self?.enteredBackground()
    }
    observe(UIApplication.willEnterForegroundNotification) { [weak self] in
      self?.send(Event<NoPayload>(event: "willEnterForeground", data: nil))
    }
    observe(UIApplication.didReceiveMemoryWarningNotification) { [weak self] in
      let available = os_proc_available_memory()
      // 0 means "not an app, or over the limit already": unknown to Rust
      let payload = MemoryPayload(availableBytes: available > 0 ? UInt64(available) : nil)
      self?.send(Event(event: "memoryWarning", data: payload))
    }
    // Apple: read thermalState once before observing its changes
    let initial = ProcessInfo.processInfo.thermalState
    observe(ProcessInfo.thermalStateDidChangeNotification) { [weak self] in
      self?.sendThermal(ProcessInfo.processInfo.thermalState)
    }
    sendThermal(initial)
  }

  // The observer runs on the main queue (`queue: .main`), so on the main actor.
  private func observe(
    _ name: Notification.Name, _ action: @escaping @MainActor @Sendable () -> Void
  ) {
    let center = NotificationCenter.default
    observers.append(
      center.addObserver(forName: name, object: nil, queue: .main) { _ in
        MainActor.assumeIsolated { action() }
      })
  }

  private func send<Payload: Encodable>(_ event: Event<Payload>) {
    do { try handler?.send(event) } catch { Tauri.Logger.error("companion-mobile: \(error)") }
  }

  private func sendThermal(_ state: ProcessInfo.ThermalState) {
    let name: String
    switch state {
    case .nominal: name = "nominal"
    case .fair: name = "fair"
    case .serious: name = "serious"
    case .critical: name = "critical"
    @unknown default: return
    }
    send(Event(event: "thermalStateChanged", data: ThermalPayload(state: name)))
  }

  // Ask for background time first, so that Rust's snapshot and flush run within it.
  private func enteredBackground() {
    // Apple calls the expiration handler on the main thread, once the app's background time is
    // up: every task still held ends then (the handler needs no task id, which it could only
    // have captured before beginBackgroundTask returned it).
    let id = UIApplication.shared.beginBackgroundTask(withName: "companion-save") {
      [weak self] in
      MainActor.assumeIsolated { self?.backgroundTimeExpiring() }
    }
    var task: UInt64? = nil
    if id != .invalid {
      task = UInt64(id.rawValue)
      backgroundTasks[UInt64(id.rawValue)] = id
    }
    send(Event(event: "didEnterBackground", data: TaskPayload(task: task)))
  }

  // the time is up: tell Rust, and end the tasks ourselves, or iOS ends the app
  private func backgroundTimeExpiring() {
    send(Event<NoPayload>(event: "backgroundTimeExpiring", data: nil))
    for task in Array(backgroundTasks.keys) {
      endTask(task)
    }
  }

  func endTask(_ task: UInt64) {
    if let id = backgroundTasks.removeValue(forKey: task) {
      UIApplication.shared.endBackgroundTask(id)
    }
  }

  // A second pick while one is on screen is refused, and the first goes on: the picker shown
  // is the first's (UIKit shows no second one over it), so only the first can be answered by
  // what the user picks.
  func pickFolder(_ invoke: Invoke, over root: UIViewController?) {
    guard picking == nil else {
      invoke.reject("the folder picker is already open")
      return
    }
    guard var presenter = root else {
      invoke.reject("the app has no view to show the folder picker over")
      return
    }
    // over whatever is shown already, or UIKit does not show it (and never calls back)
    while let shown = presenter.presentedViewController {
      presenter = shown
    }
    let picker = UIDocumentPickerViewController(forOpeningContentTypes: [.folder])
    picker.delegate = self
    picker.allowsMultipleSelection = false
    picking = invoke
    presenter.present(picker, animated: true)
  }

  func documentPicker(
    _ controller: UIDocumentPickerViewController, didPickDocumentsAt urls: [URL]
  ) {
    guard let invoke = picking else { return }
    picking = nil
    guard let url = urls.first else {
      // nothing picked is answered as a cancel
      invoke.resolve(["path": nil, "bookmark": nil])
      return
    }
    guard url.startAccessingSecurityScopedResource() else {
      invoke.reject("iOS did not open the folder you picked", code: "revoked")
      return
    }
    do {
      // on iOS a plain bookmark carries the security scope
      let bookmark = try url.bookmarkData(
        options: .minimalBookmark, includingResourceValuesForKeys: nil, relativeTo: nil)
      accessing[url.path] = url
      invoke.resolve(["path": url.path, "bookmark": bookmark.base64EncodedString()])
    } catch {
      url.stopAccessingSecurityScopedResource()
      invoke.reject("iOS could not remember the folder: \(error.localizedDescription)")
    }
  }

  func documentPickerWasCancelled(_ controller: UIDocumentPickerViewController) {
    guard let invoke = picking else { return }
    picking = nil
    invoke.resolve(["path": nil, "bookmark": nil])
  }

  func resolveBookmark(_ data: Data, _ invoke: Invoke) {
    var stale = false
    let url: URL
    do {
      url = try URL(
        resolvingBookmarkData: data, options: [.withoutUI], relativeTo: nil,
        bookmarkDataIsStale: &stale)
    } catch {
      invoke.reject(error.localizedDescription, code: "revoked")
      return
    }
    if accessing[url.path] == nil {
      guard url.startAccessingSecurityScopedResource() else {
        invoke.reject(url.path, code: "revoked")
        return
      }
      accessing[url.path] = url
    }
    var isFolder: ObjCBool = false
    guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder),
      isFolder.boolValue
    else {
      invoke.reject(url.path, code: "revoked")
      return
    }
    var refreshed: String? = nil
    if stale {
      refreshed = try? url.bookmarkData(
        options: .minimalBookmark, includingResourceValuesForKeys: nil, relativeTo: nil
      ).base64EncodedString()
    }
    invoke.resolve(["path": url.path, "stale": stale, "bookmark": refreshed])
  }

  func createReminder(_ args: ReminderArgs, _ invoke: Invoke) {
    // full access is asked only when the agent first adds a reminder; EventKit answers on a
    // queue of its own, and the store is used on the main actor only
    reminders.requestFullAccessToReminders { granted, _ in
      Task { @MainActor in self.addReminder(args, invoke, granted: granted) }
    }
  }

  private func addReminder(_ args: ReminderArgs, _ invoke: Invoke, granted: Bool) {
    guard granted else {
      invoke.reject(
        "Companion may not add reminders: allow it in Settings › Companion › Reminders",
        code: "denied")
      return
    }
    let reminder = EKReminder(eventStore: reminders)
    reminder.title = args.title
    reminder.calendar = reminders.defaultCalendarForNewReminders()
    let due = Date(timeIntervalSince1970: TimeInterval(args.dueMs) / 1000)
    let calendar = Calendar(identifier: .gregorian)
    let parts = calendar.dateComponents(
      [.calendar, .timeZone, .year, .month, .day, .hour, .minute], from: due)
    // EventKit on iOS wants a start date whenever there is a due date
    reminder.startDateComponents = parts
    reminder.dueDateComponents = parts
    reminder.addAlarm(EKAlarm(absoluteDate: due))
    do {
      try reminders.save(reminder, commit: true)
      invoke.resolve(["identifier": reminder.calendarItemIdentifier])
    } catch {
      invoke.reject(error.localizedDescription)
    }
  }
}

@_cdecl("init_plugin_companion_mobile")
func initPlugin() -> Plugin {
  return CompanionMobilePlugin()
}
