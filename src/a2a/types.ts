import type { PushConfig } from "../domain/a2a-push.js";
/**
 * The A2A objects in their v0.3 wire shape (`types/src/types.ts@v0.3.0`). They are also our
 * internal model: the v0.3 codec sends them as they are, the v1.0 codec converts them.
 */
import type { JsonObject } from "../domain/json.js";

export type TaskState = "submitted" | "working" | "input-required" | "completed" | "canceled" | "failed" | "rejected" | "auth-required" | "unknown";

export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set(["completed", "canceled", "failed", "rejected"]);

export type TextPart = { kind: "text"; text: string; metadata?: JsonObject };
export type DataPart = { kind: "data"; data: JsonObject; metadata?: JsonObject };
export type FilePart = {
  kind: "file";
  file: { name?: string; mimeType?: string; bytes?: string; uri?: string };
  metadata?: JsonObject;
};
export type Part = TextPart | DataPart | FilePart;

export interface Message {
  kind: "message";
  role: "user" | "agent";
  parts: Part[];
  messageId: string;
  taskId?: string;
  contextId?: string;
  metadata?: JsonObject;
  referenceTaskIds?: string[];
  extensions?: string[];
}

export interface TaskStatus {
  state: TaskState;
  message?: Message;
  timestamp?: string;
}

export interface Artifact {
  artifactId: string;
  name?: string;
  description?: string;
  parts: Part[];
  metadata?: JsonObject;
}

export interface Task {
  kind: "task";
  id: string;
  contextId: string;
  status: TaskStatus;
  history?: Message[];
  artifacts?: Artifact[];
  metadata?: JsonObject;
}

export interface TaskStatusUpdateEvent {
  kind: "status-update";
  taskId: string;
  contextId: string;
  status: TaskStatus;
  final: boolean;
  metadata?: JsonObject;
}

export interface TaskArtifactUpdateEvent {
  kind: "artifact-update";
  taskId: string;
  contextId: string;
  artifact: Artifact;
  append?: boolean;
  lastChunk?: boolean;
  metadata?: JsonObject;
}

export type StreamEvent = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent;

/** What `message/send` and `message/stream` carry, after decoding either protocol version. */
export interface SendParams {
  message: Message;
  /** Non-standard LangGraph field (`params.message.command` too): resume an interrupt with this value. */
  command?: { resume?: unknown };
  /** The seed / OpenAPI shape `params.thread.threadId`, used when the message has no contextId. */
  threadId?: string;
  historyLength?: number;
  /** false: answer with the task as soon as it is created (v0.3 `blocking`, v1.0 `returnImmediately`). */
  blocking: boolean;
  /** A push notification config for the task (its id defaults to the task id). */
  pushConfig?: PushConfigInput;
  metadata?: JsonObject;
}

export interface ListParams {
  contextId?: string;
  state?: TaskState;
  pageSize: number;
  offset: number;
  historyLength?: number;
  statusTimestampAfter?: string;
  includeArtifacts: boolean;
}

export interface TaskPage {
  tasks: Task[];
  nextPageToken: string;
  pageSize: number;
  totalSize: number;
}

/** The operations of the endpoint, whatever the method name of the protocol version. */
export type Operation = "send" | "stream" | "get" | "list" | "cancel" | "subscribe" | "pushSet" | "pushGet" | "pushList" | "pushDelete" | "extendedCard";

/** A push config as a client sends it: without an id, the task id names it (as a2a-js does). */
export type PushConfigInput = Omit<PushConfig, "id"> & { id?: string };

export interface PushSetParams {
  taskId: string;
  config: PushConfigInput;
}

/** Get/delete (configId: the one named; get without one: the config named after the task) and list. */
export interface PushQuery {
  taskId: string;
  configId?: string;
}
