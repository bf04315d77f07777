// The IPC contract between the webview and the Rust side (src-tauri/src/commands/).
// Every command's error rejects the promise with an `AppError`. Payloads are camelCase; stream
// enums are `{ event, data }`. Times are Unix milliseconds.

export interface AppError {
  code: string;
  /** One sentence saying what happened and what to do next. */
  message: string;
}

export type Phase = "loading" | "ready" | "failed";

export interface AppState {
  phase: Phase;
  /** What is being done while loading ("Opening the database", "Loading the model"). */
  stage: string | null;
  /** Set when phase is "failed": why, and what to do (import a model, change settings). */
  error: AppError | null;
  /** A notice to show once, e.g. the database was damaged and set aside. */
  notices: string[];
}

export interface ConversationItem {
  id: string;
  title: string;
  pinned: boolean;
  createdAt: number;
  updatedAt: number;
  messageCount: number;
  /** The start of the last message. */
  preview: string | null;
  /** The agent's tools are on in this conversation. */
  tools: boolean;
}

export type Role = "system" | "user" | "assistant";
export type MessageStatus = "streaming" | "complete" | "stopped" | "error";

export interface MessageView {
  id: number;
  seq: number;
  role: Role;
  text: string;
  status: MessageStatus;
  createdAt: number;
  stats: ReplyStats | null;
  /** The tool calls of a turn with tools, in order (absent for a plain reply). */
  toolCalls?: ToolTurnCall[];
  /** The pictures attached to a user's message, in order (absent when it has none); read
   *  for display with the `picture` command. */
  pictures?: PictureRef[];
}

/** A picture kept with a message, named by the sha256 of its file. */
export interface PictureRef {
  sha256: string;
  mimeType: string;
}

/** One call of a turn with tools, as the conversation keeps it with the reply. */
export interface ToolTurnCall {
  step: number;
  /** Empty for a call that could not be used (errorCode invalid_call). */
  tool: string;
  arguments: unknown;
  ok: boolean;
  errorCode: string | null;
  preview: string;
  truncated: boolean;
}

export type AgentStop = "answered" | "maxTokens" | "stepLimit" | "noRoomForResults" | "contextFull" | "cancelled";

/** The steps of a turn with tools (chat event `tool`). */
export type AgentEvent =
  | { event: "callStarted"; data: { step: number; tool: string; arguments: unknown } }
  | { event: "waitingForApproval"; data: { step: number; tool: string; arguments: unknown; action: string } }
  | {
      event: "progress";
      data: { tool: string; done: number; total: number | null; message: string; remainingSeconds: number | null };
    }
  | {
      event: "callFinished";
      data: { step: number; tool: string; ok: boolean; errorCode: string | null; preview: string; truncated: boolean };
    }
  | { event: "invalidCall"; data: { step: number; problem: string } }
  | { event: "done"; data: { stop: AgentStop; steps: number } };

export type GrantMode = "read" | "write";

export interface FolderView {
  path: string;
  name: string;
  mode: GrantMode;
  addedAt: number;
  /** The folder is there (an unplugged disk's grant stays, shown as missing). */
  available: boolean;
  /** Why it is not (moved, deleted, or on iOS its access revoked in Files). */
  unavailableReason: string | null;
}

export interface Note {
  id: number;
  title: string;
  text: string;
  conversationId: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface Reminder {
  id: number;
  text: string;
  dueAt: number;
  conversationId: string | null;
  createdAt: number;
  notifiedAt: number | null;
  doneAt: number | null;
}

export interface ToolCallRecord {
  id: number;
  conversationId: string | null;
  tool: string;
  arguments: unknown;
  outcome: "ok" | "error" | "denied";
  errorCode: string | null;
  durationMs: number;
  createdAt: number;
}

/** One tool of an MCP server, as the Servers tab lists it. */
export interface McpToolStatus {
  /** `server/tool`. */
  name: string;
  description: string;
  /** Read-only, and the user allowed this server's read-only tools: runs without asking. */
  preApproved: boolean;
}

export interface McpServerStatus {
  name: string;
  transport: "stdio" | "http";
  state: "ready" | "failed" | "stopped" | "disabled";
  message: string | null;
  tools: McpToolStatus[];
  /** Tools left out, each with its reason. */
  notices: string[];
  allowReadOnlyTools: boolean;
}

export interface ServersView {
  configPath: string | null;
  /** The configuration's text (`{"mcpServers": {…}}`). */
  config: string;
  /** (Re)starting: the list is the previous one until the servers are ready. */
  starting: boolean;
  error: string | null;
  servers: McpServerStatus[];
  /** False on iOS: only servers with a `url` can run there. */
  stdioSupported: boolean;
}

export type Resume =
  | { kind: "snapshot"; tokens: number }
  | { kind: "reprefill"; tokens: number }
  | { kind: "otherModel"; tokens: number }
  | { kind: "empty" };

export interface OpenedConversation {
  conversation: ConversationItem;
  messages: MessageView[];
  resume: Resume;
}

export interface ReplyStats {
  timeToFirstTokenMs: number;
  tokensPerSecond: number;
  promptTokens: number;
  reusedTokens: number;
  generatedTokens: number;
  stopReason: "end_of_turn" | "max_tokens" | "stop_string" | "cancelled" | "context_full";
}

export type ThermalState = "nominal" | "fair" | "serious" | "critical" | "unknown";

export interface ThermalNotice {
  state: ThermalState;
  previous: ThermalState;
  ratePercent: number;
  fewerThreads: boolean;
  backgroundPaused: boolean;
  message: string;
}

/** Streamed by send_message, regenerate and edit_message, in this order:
 *  one `user` (the committed user message; drop every shown message with seq >= its seq,
 *  then show it), maybe `summarizing`, then `text`* and `thermal`*, then one `done` or `error`. */
export type ChatEvent =
  | { event: "user"; data: MessageView }
  | { event: "summarizing"; data: null }
  | { event: "text"; data: string }
  | { event: "thermal"; data: ThermalNotice }
  | { event: "tool"; data: AgentEvent }
  | { event: "done"; data: MessageView }
  | { event: "error"; data: AppError };

export interface SearchSegment {
  text: string;
  hit: boolean;
}

export interface SearchHit {
  conversationId: string;
  conversationTitle: string;
  /** null when the title matched. */
  messageId: number | null;
  seq: number | null;
  role: Role | null;
  segments: SearchSegment[];
}

export type Device = "cpu" | "cuda" | "metal";
/** Speculative decoding, the same replies either way: `lookup` drafts from the conversation
 *  and checks the draft in one pass (faster where the reply repeats it); `mtp` drafts with the
 *  model's Gemma 4 assistant (paired in the model library); `auto`: the assistant when the
 *  model has one, else lookup; `off`: one token per pass. */
export type Speculation = "auto" | "lookup" | "mtp" | "off";
export type Theme = "system" | "light" | "dark";

export interface Settings {
  temperature: number;
  topP: number;
  topK: number;
  repetitionPenalty: number;
  maxTokens: number;
  speculation: Speculation;
  contextSize: number;
  threads: number;
  device: Device;
  systemPrompt: string;
  /** Decode rate when warm / hot, as a fraction of full speed (0.1..1). */
  fairRate: number;
  seriousRate: number;
  theme: Theme;
  /** Serve the local API (OpenAI-compatible) on 127.0.0.1:apiPort; off by default. */
  apiEnabled: boolean;
  apiPort: number;
  /** The model file in use, when one was chosen in the model panel (absent: the default).
   *  set_settings keeps the current one whatever is sent: models are switched with switch_model. */
  modelPath?: string;
}

/** The local API as the settings panel shows it (api_status). */
export interface ApiStatus {
  running: boolean;
  /** http://127.0.0.1:PORT/v1 while running. */
  url: string | null;
  /** The bearer token, while running (for the copy button). */
  token: string | null;
  tokenFile: string;
  /** Why it does not run although switched on. */
  problem: string | null;
}

export interface SettingsApplied {
  settings: Settings;
  /** True when the engine is being reloaded to apply them (app_state goes to "loading"). */
  reloading: boolean;
}

export interface ModelView {
  fileName: string;
  path: string;
  name: string | null;
  architecture: string;
  /** "Gemma 3", "Gemma 4", … */
  family: string;
  /** Layers, sliding window, KV sharing and width in one line. */
  layout: string;
  /** "base" (continues text) or "instruct" (answers). */
  tuning: "base" | "instruct";
  /** For a base model, the sentence that explains it. */
  tuningNotice: string | null;
  parameters: number;
  quantization: string;
  fileBytes: number;
  sha256: string;
  context: number;
  device: string;
  /** The forward pass's implementation: "host" (Companion's CPU kernels) or "candle". */
  backend: string;
  /** Estimated bytes the model and its KV cache take at this context. */
  memoryEstimateBytes: number;
  kvBytesPerToken: number;
  loadSeconds: number;
  /** The Gemma 4 assistant that drafts for the model (paired in the library), in one line. */
  assistant?: string | null;
  /** A vision projector is loaded beside the model: messages may carry pictures. */
  readsPictures: boolean;
  /** The projector (paired in the library) in one line, when one is loaded. */
  projector?: string | null;
}

export interface ModelFile {
  path: string;
  fileName: string;
  bytes: number;
  current: boolean;
  /** In the model library: its name, version and fingerprint; null for other files. */
  name: string | null;
  version: number | null;
  sha256: string | null;
  /** An import's answer only: the file was a Gemma 4 assistant, now paired with this model. */
  pairedAssistant?: boolean;
  /** An import's answer only: the file was a vision projector, now paired with this model. */
  pairedProjector?: boolean;
}

/** What verify_model found: the file hashed again against the sha256 of its import. */
export interface Verification {
  label: string;
  matches: boolean;
  expected: string;
  found: string;
}

/** Streamed by import_model while the file is hashed and copied (and by verify_model). */
export interface ImportProgress {
  done: number;
  total: number;
}

export interface StatusView {
  phase: Phase;
  backend: string | null;
  /** Of the last reply in this run of the app. */
  lastReply: ReplyStats | null;
  /** Resident memory of the app process. */
  memoryBytes: number | null;
  thermal: ThermalState;
  thermalMessage: string | null;
  /** A reply or a document job is running. */
  busy: boolean;
  /** The loaded model's sentence for the user: set for a base model, which continues text
   *  instead of answering. */
  modelNotice: string | null;
  /** The loaded model reads pictures (a vision projector is loaded beside it). */
  readsPictures: boolean;
  /** Grows each time sync brought changes from another device: reload the lists. */
  syncChanges: number;
}

/** Sync through a folder, as the settings panel shows it (sync_status). */
export interface SyncView {
  /** The folder this device syncs through; null: not syncing. */
  folder: string | null;
  device: string | null;
  syncing: boolean;
  lastRoundAt: number | null;
  /** What the last round did, in a sentence. */
  lastOutcome: string | null;
  /** Why the last round could not finish, or the files it skipped. */
  lastError: string | null;
  unsent: number;
  waiting: number;
  /** Other devices seen in the folder. */
  devices: number;
}

export interface DocumentProgress {
  level: number;
  done: number;
  total: number;
  reused: number;
  elapsedSeconds: number;
  remainingSeconds: number | null;
  paused: boolean;
}

/** Streamed by summarize_document / summarize_dropped: `started`, `progress`*, then `done` or `error`. */
export type DocumentEvent =
  | { event: "started"; data: { fileName: string } }
  | { event: "progress"; data: DocumentProgress }
  | { event: "done"; data: { conversationId: string; title: string } }
  | { event: "error"; data: AppError };

/** The commands, with their argument names as Tauri expects them (camelCase). */
export interface Commands {
  app_state: { args: Record<string, never>; result: AppState };
  status: { args: Record<string, never>; result: StatusView };
  list_conversations: { args: Record<string, never>; result: ConversationItem[] };
  create_conversation: { args: Record<string, never>; result: OpenedConversation };
  /** Stops a running reply first. */
  open_conversation: { args: { id: string }; result: OpenedConversation };
  rename_conversation: { args: { id: string; title: string }; result: ConversationItem };
  set_pinned: { args: { id: string; pinned: boolean }; result: ConversationItem };
  /** If it was open, no conversation is open afterwards. */
  delete_conversation: { args: { id: string }; result: null };
  search_conversations: { args: { query: string }; result: SearchHit[] };
  /** Opens a native save dialog; null when the user cancelled. Returns the written path. */
  export_conversation: { args: { id: string; format: "markdown" | "json" }; result: string | null };
  /** Prefill the draft (call debounced, ~150 ms after the last keystroke). Never waits. */
  set_draft: { args: { text: string }; result: null };
  /** Resolves with the reply when done; events stream on `onEvent`. */
  /** tools: the conversation's Tools switch (kept with it); on, the agent loop answers.
   *  pictures: data URLs of the attached pictures (refused with tools on, code
   *  pictures_with_tools; by a model without a projector, no_projector; unreadable,
   *  bad_picture), checked before anything is saved. */
  send_message: {
    args: { text: string; tools?: boolean; pictures?: string[]; onEvent: unknown };
    result: MessageView;
  };
  regenerate: { args: { onEvent: unknown }; result: MessageView };
  edit_message: { args: { messageId: number; text: string; onEvent: unknown }; result: MessageView };
  stop_reply: { args: Record<string, never>; result: null };
  /** A reply paused because the device is critically hot goes on (at the hot pace). */
  resume_reply: { args: Record<string, never>; result: null };
  /** A picture of a stored message (MessageView.pictures), as a data URL. */
  picture: { args: { sha256: string }; result: string };
  /** path: a picture file the user dropped on the window; checked, as a data URL. */
  dropped_picture: { args: { path: string }; result: string };
  get_settings: { args: Record<string, never>; result: Settings };
  set_settings: { args: { settings: Settings }; result: SettingsApplied };
  api_status: { args: Record<string, never>; result: ApiStatus };
  model_info: { args: Record<string, never>; result: ModelView | null };
  list_models: { args: Record<string, never>; result: ModelFile[] };
  /** Opens a native file dialog, checks the GGUF and copies it into the models directory. */
  /** Progress streams on `onProgress`; null: the user cancelled the dialog. */
  import_model: { args: { onProgress: unknown }; result: ModelFile | null };
  /** path: one of list_models(); it is self-checked first (a failure keeps the model in use,
   *  code self_check_failed), then the engine reloads (app_state goes to "loading"). */
  switch_model: { args: { path: string }; result: null };
  /** path: a library model of list_models(), not the one in use (code model_in_use). */
  remove_model: { args: { path: string }; result: { fileDeleted: boolean } };
  /** path: a library model; progress streams on `onProgress` while it is hashed. */
  verify_model: { args: { path: string; onProgress: unknown }; result: Verification };
  /** Opens a native file dialog (.txt .md .html .pdf); null when cancelled. */
  summarize_document: { args: { onEvent: unknown }; result: { conversationId: string } | null };
  /** path: a file the user dropped on the window (the Rust side only accepts dropped paths). */
  summarize_dropped: { args: { path: string; onEvent: unknown }; result: { conversationId: string } };
  cancel_document: { args: Record<string, never>; result: null };
  /** The folder of the log files (what a user sends when something went wrong). */
  log_folder: { args: Record<string, never>; result: string };
  /** Opens the log folder in the file manager; returns its path. */
  open_log_folder: { args: Record<string, never>; result: string };
  list_folders: { args: Record<string, never>; result: FolderView[] };
  /** Opens the native folder picker; null when cancelled. */
  add_folder: { args: { mayWrite: boolean }; result: FolderView | null };
  set_folder_mode: { args: { path: string; mayWrite: boolean }; result: FolderView };
  revoke_folder: { args: { path: string }; result: boolean };
  list_notes: { args: Record<string, never>; result: Note[] };
  delete_note: { args: { id: number }; result: boolean };
  list_reminders: { args: Record<string, never>; result: Reminder[] };
  complete_reminder: { args: { id: number }; result: null };
  delete_reminder: { args: { id: number }; result: boolean };
  /** Reminders that fell due since the last call (each is returned once). */
  due_reminders: { args: Record<string, never>; result: Reminder[] };
  list_activity: { args: { conversationId: string | null }; result: ToolCallRecord[] };
  clear_activity: { args: Record<string, never>; result: number };
  /** The answer to the write waiting for approval; false when none was waiting. */
  answer_approval: { args: { answer: "yes" | "no" | "conversation" }; result: boolean };
  set_conversation_tools: { args: { id: string; enabled: boolean }; result: null };
  mcp_servers: { args: Record<string, never>; result: ServersView };
  /** Checks and saves the MCP configuration, then restarts the servers in the background. */
  save_mcp_config: { args: { config: string }; result: ServersView };
  set_mcp_server_enabled: { args: { name: string; enabled: boolean }; result: ServersView };
  sync_status: { args: Record<string, never>; result: SyncView };
  /** Opens the native folder picker (on iOS: the app's iCloud Drive folder); null when
   *  cancelled. Syncing starts at once. */
  choose_sync_folder: { args: Record<string, never>; result: SyncView | null };
  /** The folder's files stay; choosing it again continues. */
  stop_sync: { args: Record<string, never>; result: SyncView };
  sync_now: { args: Record<string, never>; result: null };
}
