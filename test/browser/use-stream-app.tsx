/**
 * A chat page on `@langchain/react`'s `useStream` (the thread streaming protocol, v2): the
 * example of the README, and the page test/e2e/react-use-stream.test.ts drives in Chromium.
 * The thread id lives in the address (`?thread=`), so a reload reattaches to a run in flight.
 * Query: `api` (the server), `assistant` (default `agent`), `transport` (`sse` or `websocket`).
 */
import { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/react";

const query = new URLSearchParams(location.search);

function Chat() {
  const [threadId, setThreadId] = useState(query.get("thread"));
  const stream = useStream<{ messages: { type: string; content: string }[] }>({
    apiUrl: query.get("api") ?? "http://127.0.0.1:2024",
    assistantId: query.get("assistant") ?? "agent",
    transport: query.get("transport") === "websocket" ? "websocket" : "sse",
    threadId,
    // Remember the thread the first submit creates: a reload reattaches to it.
    onThreadId: (id) => {
      query.set("thread", id);
      history.replaceState(null, "", `?${query}`);
      setThreadId(id);
    },
  });
  const [text, setText] = useState("");
  const question = (stream.interrupt?.value as { question?: string } | undefined)?.question;

  return (
    <main>
      <ul id="messages">
        {stream.messages.map((message) => (
          <li key={message.id} data-type={message.type}>
            {message.text}
          </li>
        ))}
      </ul>
      {question && (
        <p id="interrupt">
          {question} <button onClick={() => void stream.respond("yes")}>Yes</button>
        </p>
      )}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          void stream.submit({ messages: [{ type: "human", content: text }] });
          setText("");
        }}
      >
        <input name="text" value={text} onChange={(event) => setText(event.target.value)} />
        <button disabled={stream.isLoading}>Send</button>
      </form>
      <p id="status">{stream.isLoading ? "running" : "idle"}</p>
      {stream.error ? <p id="error">{String(stream.error)}</p> : null}
      <pre id="state">{JSON.stringify(stream.values)}</pre>
    </main>
  );
}

createRoot(document.getElementById("root")!).render(<Chat />);
