/**
 * The two wire versions of the endpoint. Each codec names its methods, decodes their params into
 * the internal (v0.3-shaped) model and encodes results, stream events and errors back.
 *   v0.3: `message/send`… with `kind` discriminators, lowercase states, `final` on status updates.
 *   v1.0: `SendMessage`… with wrapped results (`{task}`, `{statusUpdate}`), `TASK_STATE_*`,
 *         `ROLE_*`, one Part shape (`text|raw|url|data` + `mediaType`, `filename`), no `kind`/`final`,
 *         `error.data` as `google.rpc.ErrorInfo` objects.
 */
import { randomUUID } from "node:crypto";
import * as z from "zod";
import { A2AError, ERROR_REASONS, ErrorCode, invalidParams } from "./errors.js";
import type { ProtocolVersion } from "./jsonrpc.js";
import type { StoredPushConfig } from "../domain/a2a-push.js";
import { canonicalIfUuid } from "../domain/ids.js";
import type {
  Artifact,
  ListParams,
  Message,
  Operation,
  Part,
  PushConfigInput,
  PushQuery,
  PushSetParams,
  SendParams,
  StreamEvent,
  Task,
  TaskPage,
  TaskState,
  TaskStatus,
} from "./types.js";
import { JsonObjectSchema } from "../util/json.js";

export interface Codec {
  version: ProtocolVersion;
  methods: Readonly<Record<string, Operation>>;
  decodeSend(params: unknown): SendParams;
  decodeTaskQuery(params: unknown): { id: string; historyLength?: number };
  decodeTaskId(params: unknown): { id: string };
  decodeList(params: unknown): ListParams;
  encodeSendResult(task: Task): unknown;
  encodeTask(task: Task): unknown;
  encodeEvent(event: StreamEvent): unknown;
  encodeList(page: TaskPage): unknown;
  encodeError(error: A2AError): { code: number; message: string; data?: unknown };
  decodePushSet(params: unknown): PushSetParams;
  decodePushGet(params: unknown): PushQuery;
  decodePushList(params: unknown): PushQuery;
  decodePushDelete(params: unknown): Required<PushQuery>;
  encodePushConfig(taskId: string, config: StoredPushConfig): unknown;
  encodePushList(taskId: string, configs: StoredPushConfig[]): unknown;
  /** What a push notification POSTs: the task (v0.3), a StreamResponse `{task}` (v1.0). */
  encodePushBody(task: Task): unknown;
}

const Obj = JsonObjectSchema;
const NonNegativeInt = z.number().int().min(0);

/** zod failure → -32602 naming the field. */
function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const where = ["params", ...issue.path.map(String)].join(".");
  throw invalidParams(`Invalid params: ${where}: ${issue.message}`);
}

/** A task or context id as the client sent it; canonical when it is a UUID (contexts are threads). */
const A2AId = z.string().overwrite(canonicalIfUuid);

const blankToUndefined = (v: string | undefined | null) => (v === undefined || v === null || v === "" ? undefined : v);

/** The push config fields both versions share; `url` must be an absolute http(s) URL (the URL policy checks the rest). */
const PushFields = {
  id: z.string().optional(),
  url: z
    .string()
    .url("must be an absolute URL")
    .refine((u) => /^https?:/i.test(u), "must be an http or https URL"),
  token: z.string().optional(),
};

function pushInput(c: { id?: string; url: string; token?: string }, authentication: PushConfigInput["authentication"]): PushConfigInput {
  const out: PushConfigInput = { url: c.url };
  if (blankToUndefined(c.id)) out.id = c.id;
  if (blankToUndefined(c.token)) out.token = c.token;
  if (authentication) out.authentication = authentication;
  return out;
}

// ------------------------------------------------------------------ v0.3

const PartV03 = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("text"), text: z.string(), metadata: Obj.optional() }),
  z.object({ kind: z.literal("data"), data: Obj, metadata: Obj.optional() }),
  z.object({
    kind: z.literal("file"),
    file: z.object({ name: z.string().optional(), mimeType: z.string().optional(), bytes: z.string().optional(), uri: z.string().optional() }),
    metadata: Obj.optional(),
  }),
]);

const MessageV03 = z.object({
  kind: z.literal("message").optional(),
  role: z.enum(["user", "agent"]),
  parts: z.array(PartV03).min(1, "a message needs at least one part"),
  messageId: z.string().optional(),
  taskId: A2AId.nullable().optional(),
  contextId: A2AId.nullable().optional(),
  metadata: Obj.optional(),
  referenceTaskIds: z.array(A2AId).optional(),
  extensions: z.array(z.string()).optional(),
  command: z.object({ resume: z.unknown() }).partial().optional(),
});

const SendV03 = z.object({
  message: MessageV03,
  // The seed / OpenAPI example shape: `messageId` and `thread.threadId` beside the message.
  messageId: z.string().optional(),
  thread: z.object({ threadId: A2AId.nullable().optional() }).optional(),
  command: z.object({ resume: z.unknown() }).partial().optional(),
  configuration: z
    .object({
      acceptedOutputModes: z.array(z.string()).optional(),
      historyLength: NonNegativeInt.optional(),
      pushNotificationConfig: z.lazy(() => PushConfigV03).optional(),
      blocking: z.boolean().optional(),
    })
    .optional(),
  metadata: Obj.optional(),
});

const AuthV03 = z.object({ schemes: z.array(z.string()), credentials: z.string().optional() });
const PushConfigV03 = z.object({ ...PushFields, authentication: AuthV03.optional() });
const PushSetV03 = z.object({ taskId: A2AId.min(1), pushNotificationConfig: PushConfigV03, metadata: Obj.optional() });
const PushQueryV03 = z.object({ id: A2AId.min(1), pushNotificationConfigId: z.string().optional(), metadata: Obj.optional() });
const PushDeleteV03 = z.object({ id: A2AId.min(1), pushNotificationConfigId: z.string().min(1), metadata: Obj.optional() });

function pushConfigV03(c: StoredPushConfig): Record<string, unknown> {
  const out: Record<string, unknown> = { id: c.id, url: c.url };
  if (c.token !== undefined) out.token = c.token;
  if (c.authentication) out.authentication = c.authentication;
  return out;
}

const TaskQuery = z.object({ id: A2AId.min(1), historyLength: NonNegativeInt.optional(), metadata: Obj.optional(), tenant: z.string().optional() });
const TaskIdParams = z.object({ id: A2AId.min(1), metadata: Obj.optional(), tenant: z.string().optional() });

function messageOf(m: z.infer<typeof MessageV03>, fallbackId: string | undefined, parts: Part[]): Message {
  const out: Message = { kind: "message", role: m.role, parts, messageId: blankToUndefined(m.messageId) ?? blankToUndefined(fallbackId) ?? randomUUID() };
  const taskId = blankToUndefined(m.taskId);
  const contextId = blankToUndefined(m.contextId);
  if (taskId) out.taskId = taskId;
  if (contextId) out.contextId = contextId;
  if (m.metadata) out.metadata = m.metadata as Message["metadata"];
  if (m.referenceTaskIds) out.referenceTaskIds = m.referenceTaskIds;
  return out;
}

export const v03: Codec = {
  version: "0.3",
  methods: {
    "message/send": "send",
    "message/stream": "stream",
    "tasks/get": "get",
    "tasks/cancel": "cancel",
    "tasks/resubscribe": "subscribe",
    "tasks/pushNotificationConfig/set": "pushSet",
    "tasks/pushNotificationConfig/get": "pushGet",
    "tasks/pushNotificationConfig/list": "pushList",
    "tasks/pushNotificationConfig/delete": "pushDelete",
    "agent/getAuthenticatedExtendedCard": "extendedCard",
  },
  decodeSend(params) {
    const p = parse(SendV03, params);
    const message = messageOf(p.message, p.messageId, p.message.parts as Part[]);
    const command = p.message.command ?? p.command;
    return {
      message,
      ...(command ? { command } : {}),
      ...(blankToUndefined(p.thread?.threadId) ? { threadId: p.thread!.threadId! } : {}),
      ...(p.configuration?.historyLength !== undefined ? { historyLength: p.configuration.historyLength } : {}),
      blocking: p.configuration?.blocking !== false,
      ...(p.configuration?.pushNotificationConfig
        ? { pushConfig: pushInput(p.configuration.pushNotificationConfig, p.configuration.pushNotificationConfig.authentication) }
        : {}),
      ...(p.metadata ? { metadata: p.metadata as SendParams["metadata"] } : {}),
    };
  },
  decodeTaskQuery: (params) => {
    const p = parse(TaskQuery, params);
    return p.historyLength === undefined ? { id: p.id } : { id: p.id, historyLength: p.historyLength };
  },
  decodeTaskId: (params) => ({ id: parse(TaskIdParams, params).id }),
  decodeList() {
    throw new A2AError(ErrorCode.MethodNotFound, "Method not found");
  },
  encodeSendResult: (task) => task,
  encodeTask: (task) => task,
  encodeEvent: (event) => event,
  encodeList: (page) => page,
  encodeError: (error) => ({ code: error.code, message: error.message }),
  decodePushSet(params) {
    const p = parse(PushSetV03, params);
    return { taskId: p.taskId, config: pushInput(p.pushNotificationConfig, p.pushNotificationConfig.authentication) };
  },
  decodePushGet(params) {
    const p = parse(PushQueryV03, params);
    return blankToUndefined(p.pushNotificationConfigId) ? { taskId: p.id, configId: p.pushNotificationConfigId } : { taskId: p.id };
  },
  decodePushList: (params) => ({ taskId: parse(PushQueryV03, params).id }),
  decodePushDelete(params) {
    const p = parse(PushDeleteV03, params);
    return { taskId: p.id, configId: p.pushNotificationConfigId };
  },
  encodePushConfig: (taskId, config) => ({ taskId, pushNotificationConfig: pushConfigV03(config) }),
  encodePushList: (taskId, configs) => configs.map((c) => ({ taskId, pushNotificationConfig: pushConfigV03(c) })),
  encodePushBody: (task) => task,
};

// ------------------------------------------------------------------ v1.0

const STATE_TO_V1: Record<TaskState, string> = {
  submitted: "TASK_STATE_SUBMITTED",
  working: "TASK_STATE_WORKING",
  "input-required": "TASK_STATE_INPUT_REQUIRED",
  completed: "TASK_STATE_COMPLETED",
  canceled: "TASK_STATE_CANCELED",
  failed: "TASK_STATE_FAILED",
  rejected: "TASK_STATE_REJECTED",
  "auth-required": "TASK_STATE_AUTH_REQUIRED",
  unknown: "TASK_STATE_UNSPECIFIED",
};
const STATE_FROM_V1 = Object.fromEntries(Object.entries(STATE_TO_V1).map(([k, v]) => [v, k as TaskState])) as Record<string, TaskState>;

const PartV1 = z
  .object({
    text: z.string().optional(),
    raw: z.string().optional(),
    url: z.string().optional(),
    data: z.unknown().optional(),
    mediaType: z.string().optional(),
    filename: z.string().optional(),
    metadata: Obj.optional(),
  })
  .refine((p) => [p.text, p.raw, p.url, p.data].filter((v) => v !== undefined).length === 1, {
    message: "a part holds exactly one of text, raw, url, data",
  });

const MessageV1 = z.object({
  messageId: z.string().optional(),
  contextId: A2AId.optional(),
  taskId: A2AId.optional(),
  role: z.enum(["ROLE_USER", "ROLE_AGENT"]),
  parts: z.array(PartV1).min(1, "a message needs at least one part"),
  metadata: Obj.optional(),
  extensions: z.array(z.string()).optional(),
  referenceTaskIds: z.array(A2AId).optional(),
  command: z.object({ resume: z.unknown() }).partial().optional(),
});

const SendV1 = z.object({
  tenant: z.string().optional(),
  message: MessageV1,
  configuration: z
    .object({
      acceptedOutputModes: z.array(z.string()).optional(),
      taskPushNotificationConfig: z.lazy(() => PushConfigV1).optional(),
      historyLength: NonNegativeInt.optional(),
      returnImmediately: z.boolean().optional(),
    })
    .optional(),
  metadata: Obj.optional(),
});

/** v1.0 `TaskPushNotificationConfig`: flat, one `scheme` (empty strings are proto3 defaults, i.e. absent). */
const AuthV1 = z.object({ scheme: z.string(), credentials: z.string().optional() });
const PushConfigV1 = z.object({ tenant: z.string().optional(), taskId: A2AId.optional(), ...PushFields, authentication: AuthV1.nullish() });
const PushSetV1 = PushConfigV1.extend({ taskId: A2AId.min(1) });
const PushQueryV1 = z.object({ tenant: z.string().optional(), taskId: A2AId.min(1), id: z.string().optional() });
const PushListV1 = z.object({
  tenant: z.string().optional(),
  taskId: A2AId.min(1),
  pageSize: z.number().int().optional(),
  pageToken: z.string().optional(),
});
const PushDeleteV1 = PushQueryV1.extend({ id: z.string().min(1) });

const authFromV1 = (a: z.infer<typeof AuthV1> | null | undefined): PushConfigInput["authentication"] =>
  a && a.scheme ? { schemes: [a.scheme], ...(blankToUndefined(a.credentials) ? { credentials: a.credentials } : {}) } : undefined;

function pushConfigV1(taskId: string, c: StoredPushConfig): Record<string, unknown> {
  const out: Record<string, unknown> = { taskId, id: c.id, url: c.url };
  if (c.token !== undefined) out.token = c.token;
  if (c.authentication?.schemes.length) {
    out.authentication = {
      scheme: c.authentication.schemes[0],
      ...(c.authentication.credentials !== undefined ? { credentials: c.authentication.credentials } : {}),
    };
  }
  return out;
}

const ListV1 = z.object({
  tenant: z.string().optional(),
  contextId: A2AId.optional(),
  status: z.enum(Object.keys(STATE_FROM_V1) as [string, ...string[]]).optional(),
  pageSize: z.number().int().min(1).max(100).optional(),
  pageToken: z.string().regex(/^\d*$/, "must be a token returned as nextPageToken").optional(),
  historyLength: NonNegativeInt.optional(),
  statusTimestampAfter: z.string().optional(),
  includeArtifacts: z.boolean().optional(),
});

function partFromV1(p: z.infer<typeof PartV1>, index: number): Part {
  const metadata = p.metadata ? { metadata: p.metadata as Part["metadata"] } : {};
  if (p.text !== undefined) return { kind: "text", text: p.text, ...metadata };
  if (p.data !== undefined) {
    if (typeof p.data !== "object" || p.data === null || Array.isArray(p.data)) {
      throw invalidParams(`Invalid params: params.message.parts.${index}.data: must be an object to become graph input`);
    }
    return { kind: "data", data: p.data as Record<string, never>, ...metadata };
  }
  const file: Extract<Part, { kind: "file" }>["file"] = {};
  if (p.raw !== undefined) file.bytes = p.raw;
  if (p.url !== undefined) file.uri = p.url;
  if (p.mediaType) file.mimeType = p.mediaType;
  if (p.filename) file.name = p.filename;
  return { kind: "file", file, ...metadata };
}

function partToV1(p: Part): Record<string, unknown> {
  const base = p.metadata ? { metadata: p.metadata } : {};
  switch (p.kind) {
    case "text":
      return { text: p.text, ...base };
    case "data":
      return { data: p.data, ...base };
    case "file": {
      const out: Record<string, unknown> = { ...base };
      if (p.file.bytes !== undefined) out.raw = p.file.bytes;
      if (p.file.uri !== undefined) out.url = p.file.uri;
      if (p.file.mimeType) out.mediaType = p.file.mimeType;
      if (p.file.name) out.filename = p.file.name;
      return out;
    }
  }
}

function messageToV1(m: Message): Record<string, unknown> {
  const out: Record<string, unknown> = { messageId: m.messageId, role: m.role === "user" ? "ROLE_USER" : "ROLE_AGENT", parts: m.parts.map(partToV1) };
  if (m.contextId) out.contextId = m.contextId;
  if (m.taskId) out.taskId = m.taskId;
  if (m.metadata) out.metadata = m.metadata;
  if (m.referenceTaskIds?.length) out.referenceTaskIds = m.referenceTaskIds;
  return out;
}

/**
 * A timestamp in the protobuf JSON mapping of `google.protobuf.Timestamp` (RFC 3339, UTC, `Z`),
 * which v1.0 clients parse strictly. Our timestamps are `…+00:00` (the Python server's form,
 * kept by v0.3); the digits are kept as they are, any other offset is converted to UTC.
 */
export function protobufTimestamp(ts: string): string {
  const utc = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?:Z|[+-]00:?00)$/i.exec(ts);
  if (utc) return `${utc[1]}Z`;
  const ms = Date.parse(ts);
  return Number.isNaN(ms) ? ts : new Date(ms).toISOString();
}

function statusToV1(s: TaskStatus): Record<string, unknown> {
  const out: Record<string, unknown> = { state: STATE_TO_V1[s.state] };
  if (s.message) out.message = messageToV1(s.message);
  if (s.timestamp) out.timestamp = protobufTimestamp(s.timestamp);
  return out;
}

function artifactToV1(a: Artifact): Record<string, unknown> {
  const { parts, ...rest } = a;
  return { ...rest, parts: parts.map(partToV1) };
}

function taskToV1(t: Task): Record<string, unknown> {
  const out: Record<string, unknown> = { id: t.id, contextId: t.contextId, status: statusToV1(t.status) };
  if (t.artifacts) out.artifacts = t.artifacts.map(artifactToV1);
  if (t.history) out.history = t.history.map(messageToV1);
  if (t.metadata) out.metadata = t.metadata;
  return out;
}

export const v1: Codec = {
  version: "1.0",
  methods: {
    SendMessage: "send",
    SendStreamingMessage: "stream",
    GetTask: "get",
    ListTasks: "list",
    CancelTask: "cancel",
    SubscribeToTask: "subscribe",
    CreateTaskPushNotificationConfig: "pushSet",
    GetTaskPushNotificationConfig: "pushGet",
    ListTaskPushNotificationConfigs: "pushList",
    DeleteTaskPushNotificationConfig: "pushDelete",
    GetExtendedAgentCard: "extendedCard",
  },
  decodeSend(params) {
    const p = parse(SendV1, params);
    const m = p.message;
    const message: Message = {
      kind: "message",
      role: m.role === "ROLE_USER" ? "user" : "agent",
      parts: m.parts.map(partFromV1),
      messageId: blankToUndefined(m.messageId) ?? randomUUID(),
    };
    if (blankToUndefined(m.taskId)) message.taskId = m.taskId;
    if (blankToUndefined(m.contextId)) message.contextId = m.contextId;
    if (m.metadata) message.metadata = m.metadata as Message["metadata"];
    if (m.referenceTaskIds?.length) message.referenceTaskIds = m.referenceTaskIds;
    return {
      message,
      ...(m.command ? { command: m.command } : {}),
      ...(p.configuration?.historyLength !== undefined ? { historyLength: p.configuration.historyLength } : {}),
      blocking: p.configuration?.returnImmediately !== true,
      ...(p.configuration?.taskPushNotificationConfig
        ? { pushConfig: pushInput(p.configuration.taskPushNotificationConfig, authFromV1(p.configuration.taskPushNotificationConfig.authentication)) }
        : {}),
      ...(p.metadata ? { metadata: p.metadata as SendParams["metadata"] } : {}),
    };
  },
  decodeTaskQuery: v03.decodeTaskQuery,
  decodeTaskId: v03.decodeTaskId,
  decodeList(params) {
    const p = parse(ListV1, params);
    const out: ListParams = {
      pageSize: p.pageSize ?? 50,
      offset: p.pageToken ? Number(p.pageToken) : 0,
      includeArtifacts: p.includeArtifacts ?? false,
    };
    if (blankToUndefined(p.contextId)) out.contextId = p.contextId;
    if (p.status && p.status !== "TASK_STATE_UNSPECIFIED") out.state = STATE_FROM_V1[p.status];
    if (p.historyLength !== undefined) out.historyLength = p.historyLength;
    if (p.statusTimestampAfter) {
      if (Number.isNaN(Date.parse(p.statusTimestampAfter))) throw invalidParams("Invalid params: params.statusTimestampAfter: must be an ISO 8601 timestamp");
      out.statusTimestampAfter = p.statusTimestampAfter;
    }
    return out;
  },
  encodeSendResult: (task) => ({ task: taskToV1(task) }),
  encodeTask: taskToV1,
  encodeEvent(event) {
    switch (event.kind) {
      case "task":
        return { task: taskToV1(event) };
      case "status-update": {
        const out: Record<string, unknown> = { taskId: event.taskId, contextId: event.contextId, status: statusToV1(event.status) };
        if (event.metadata) out.metadata = event.metadata;
        return { statusUpdate: out };
      }
      case "artifact-update": {
        const out: Record<string, unknown> = { taskId: event.taskId, contextId: event.contextId, artifact: artifactToV1(event.artifact) };
        if (event.append) out.append = true;
        if (event.lastChunk) out.lastChunk = true;
        return { artifactUpdate: out };
      }
    }
  },
  encodeList: (page) => ({ tasks: page.tasks.map(taskToV1), nextPageToken: page.nextPageToken, pageSize: page.pageSize, totalSize: page.totalSize }),
  encodeError(error) {
    const reason = ERROR_REASONS[error.code];
    if (!reason) return { code: error.code, message: error.message };
    return { code: error.code, message: error.message, data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "a2a-protocol.org" }] };
  },
  decodePushSet(params) {
    const p = parse(PushSetV1, params);
    return { taskId: p.taskId, config: pushInput(p, authFromV1(p.authentication)) };
  },
  decodePushGet(params) {
    const p = parse(PushQueryV1, params);
    return blankToUndefined(p.id) ? { taskId: p.taskId, configId: p.id } : { taskId: p.taskId };
  },
  decodePushList: (params) => ({ taskId: parse(PushListV1, params).taskId }),
  decodePushDelete(params) {
    const p = parse(PushDeleteV1, params);
    return { taskId: p.taskId, configId: p.id };
  },
  encodePushConfig: pushConfigV1,
  encodePushList: (taskId, configs) => ({ configs: configs.map((c) => pushConfigV1(taskId, c)), nextPageToken: "" }),
  encodePushBody: (task) => ({ task: taskToV1(task) }),
};

/**
 * Which codec answers a request: the method name decides the shapes (v1.0 servers accept the v0.3
 * names); an explicit `A2A-Version: 0.3` does not know the v1.0 names.
 */
export function codecFor(method: string, header: ProtocolVersion | undefined): { codec: Codec; operation: Operation } | undefined {
  if (method in v1.methods && header !== "0.3") return { codec: v1, operation: v1.methods[method] };
  if (method in v03.methods) return { codec: v03, operation: v03.methods[method] };
  return undefined;
}
