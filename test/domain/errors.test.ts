import t from "tap";
import { conflict, DomainError, invalid, isNotFound, notFound, precondition, type FailureKind } from "../../src/domain/errors.js";
import { STATUS_OF_FAILURE } from "../../src/http/errors.js";
import { ErrorCode, toA2AError } from "../../src/a2a/errors.js";

const KINDS: FailureKind[] = ["not_found", "conflict", "invalid", "precondition"];

t.test("each helper raises its kind with the detail", async (t) => {
  const made = [notFound("a"), conflict("b"), invalid("c"), precondition("d")];
  t.same(
    made.map((e) => e.kind),
    KINDS,
  );
  t.same(
    made.map((e) => e.detail),
    ["a", "b", "c", "d"],
  );
  t.ok(made.every((e) => e instanceof DomainError && e instanceof Error));
  t.ok(isNotFound(notFound("x")));
  t.notOk(isNotFound(conflict("x")));
  t.notOk(isNotFound(new Error("x")));
});

t.test("the HTTP edge gives each kind its status", async (t) => {
  t.same(
    KINDS.map((k) => STATUS_OF_FAILURE[k]),
    [404, 409, 422, 400],
  );
});

t.test("the JSON-RPC edge gives each kind its code, by what the call was about", async (t) => {
  t.equal(toA2AError(notFound("Run not found"), "task").code, ErrorCode.TaskNotFound);
  t.equal(toA2AError(notFound("Thread not found"), "thread").code, ErrorCode.InvalidParams);
  t.equal(toA2AError(notFound("No assistant"), "assistant").code, ErrorCode.InvalidParams);
  for (const kind of ["conflict", "invalid", "precondition"] as const) {
    const mapped = toA2AError(new DomainError(kind, `refused: ${kind}`), "task");
    t.equal(mapped.code, ErrorCode.InvalidParams, kind);
    t.equal(mapped.message, `refused: ${kind}`, "the detail is the message");
  }
  t.equal(toA2AError(new Error("bug"), "task").code, ErrorCode.Internal, "anything else stays an internal error");
});
