// Companion's iOS side: it observes what iOS tells the app and asks iOS for what the Rust side
// needs. It decides nothing: every event goes to Rust (mobile/src/events.rs) on one channel,
// and every call comes from Rust (mobile/src/ios.rs). Not compiled on Linux; kept small.
//
// Threads: notification observers run on the main queue; commands run on Tauri's "ipc" queue
// and hop to the main queue for UIKit. Rust never calls in from the main thread, so a command
// may wait for the main queue before it answers (the picker, EventKit's prompt).

import EventKit
import Foundation
import Tauri
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

class CompanionMobilePlugin: Plugin, UIDocumentPickerDelegate {
  private var handler: Channel?
  private var observers: [NSObjectProtocol] = []
  private var backgroundTasks: [UInt64: UIBackgroundTaskIdentifier] = [:]
  private var picking: Invoke?
  private let reminders = EKEventStore()
  // folders whose security scope is open, by path (each is opened once)
  private var accessing: [String: URL] = [:]

  @objc public override func load(webview: WKWebView) {
    let center = NotificationCenter.default
    observe(center, UIApplication.willResignActiveNotification) { [weak self] in
      self?.send(Event<NoPayload>(event: "willResignActive", data: nil))
    }
    observe(center, UIApplication.didEnterBackgroundNotification) { [weak self] in
      self?.enteredBackground()
    }
    observe(center, UIApplication.willEnterForegroundNotification) { [weak self] in
      self?.send(Event<NoPayload>(event: "willEnterForeground", data: nil))
    }
    observe(center, UIApplication.didReceiveMemoryWarningNotification) { [weak self] in
      let available = os_proc_available_memory()
      // 0 means "not an app, or over the limit already": unknown to Rust
      let payload = MemoryPayload(availableBytes: available > 0 ? UInt64(available) : nil)
      self?.send(Event(event: "memoryWarning", data: payload))
    }
    // Apple: read thermalState once before observing its changes
    let initial = ProcessInfo.processInfo.thermalState
    observe(center, ProcessInfo.thermalStateDidChangeNotification) { [weak self] in
      self?.sendThermal(ProcessInfo.processInfo.thermalState)
    }
    sendThermal(initial)
  }

  private func observe(
    _ center: NotificationCenter, _ name: Notification.Name, _ action: @escaping () -> Void
  ) {
    observers.append(center.addObserver(forName: name, object: nil, queue: .main) { _ in action() })
  }

  private func send<Payload: Encodable>(_ event: Event<Payload>) {
    DispatchQueue.main.async {
      do { try self.handler?.send(event) } catch { Logger.error("companion-mobile: \(error)") }
    }
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

  // Main queue. Ask for background time first, so that Rust's snapshot and flush run within it.
  private func enteredBackground() {
    var id: UIBackgroundTaskIdentifier = .invalid
    id = UIApplication.shared.beginBackgroundTask(withName: "companion-save") { [weak self] in
      // the time is up: tell Rust, and end the task ourselves, or iOS ends the app
      self?.send(Event<NoPayload>(event: "backgroundTimeExpiring", data: nil))
      self?.endTask(UInt64(id.rawValue))
    }
    var task: UInt64? = nil
    if id != .invalid {
      task = UInt64(id.rawValue)
      backgroundTasks[UInt64(id.rawValue)] = id
    }
    send(Event(event: "didEnterBackground", data: TaskPayload(task: task)))
  }

  private func endTask(_ task: UInt64) {
    if let id = backgroundTasks.removeValue(forKey: task) {
      UIApplication.shared.endBackgroundTask(id)
    }
  }

  // Called from Rust only (not reachable from the webview).
  @objc public func setEventHandler(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(EventHandlerArgs.self)
    DispatchQueue.main.async { self.handler = args.handler }
    invoke.resolve()
  }

  @objc public func endBackgroundTask(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(TaskArgs.self)
    DispatchQueue.main.async { self.endTask(args.task) }
    invoke.resolve()
  }

  @objc public func pickFolder(_ invoke: Invoke) {
    DispatchQueue.main.async {
      let picker = UIDocumentPickerViewController(forOpeningContentTypes: [.folder])
      picker.delegate = self
      picker.allowsMultipleSelection = false
      self.picking = invoke
      self.manager.viewController?.present(picker, animated: true)
    }
  }

  public func documentPicker(
    _ controller: UIDocumentPickerViewController, didPickDocumentsAt urls: [URL]
  ) {
    guard let invoke = picking, let url = urls.first else { return }
    picking = nil
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

  public func documentPickerWasCancelled(_ controller: UIDocumentPickerViewController) {
    picking?.resolve(["path": nil, "bookmark": nil])
    picking = nil
  }

  @objc public func resolveBookmark(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(BookmarkArgs.self)
    guard let data = Data(base64Encoded: args.bookmark) else {
      invoke.reject("not a bookmark", code: "revoked")
      return
    }
    DispatchQueue.main.async {
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
      if self.accessing[url.path] == nil {
        guard url.startAccessingSecurityScopedResource() else {
          invoke.reject(url.path, code: "revoked")
          return
        }
        self.accessing[url.path] = url
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
  }

  @objc public func createReminder(_ invoke: Invoke) throws {
    let args = try invoke.parseArgs(ReminderArgs.self)
    // full access is asked only when the agent first adds a reminder
    reminders.requestFullAccessToReminders { granted, error in
      guard granted else {
        invoke.reject(
          "Companion may not add reminders: allow it in Settings › Companion › Reminders",
          code: "denied")
        return
      }
      let reminder = EKReminder(eventStore: self.reminders)
      reminder.title = args.title
      reminder.calendar = self.reminders.defaultCalendarForNewReminders()
      let due = Date(timeIntervalSince1970: TimeInterval(args.dueMs) / 1000)
      let calendar = Calendar(identifier: .gregorian)
      let parts = calendar.dateComponents(
        [.calendar, .timeZone, .year, .month, .day, .hour, .minute], from: due)
      // EventKit on iOS wants a start date whenever there is a due date
      reminder.startDateComponents = parts
      reminder.dueDateComponents = parts
      reminder.addAlarm(EKAlarm(absoluteDate: due))
      do {
        try self.reminders.save(reminder, commit: true)
        invoke.resolve(["identifier": reminder.calendarItemIdentifier])
      } catch {
        invoke.reject(error.localizedDescription)
      }
    }
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
}

@_cdecl("init_plugin_companion_mobile")
func initPlugin() -> Plugin {
  return CompanionMobilePlugin()
}
