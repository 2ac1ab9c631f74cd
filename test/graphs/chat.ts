/**
 * `chat`: a chat model that streams its reply slowly, token by token, so a client can watch it
 * grow, leave and come back mid-run. Offline and deterministic: the reply to `<text>` is
 *   `You said: <text>. One two three four five six seven eight nine ten.`
 * in 11 chunks (`You said: <text>.`, then one word each), id `ai-<n>` (n = messages before it),
 * one chunk every `config.configurable.delay` ms (default 250). The wait is bound to the run's
 * abort signal, so cancelling or shutting down ends it at once.
 */
import { setTimeout as wait } from "node:timers/promises";
import { AIMessage, AIMessageChunk, type BaseMessage } from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs";
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import { END, type LangGraphRunnableConfig, MessagesValue, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { contentText } from "../../src/graphs/agent.js";

export const WORDS = ["One", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten."];

/** The reply's chunks to the last message. */
export function replyChunks(messages: BaseMessage[]): string[] {
  return [`You said: ${contentText(messages.at(-1)?.content)}.`, ...WORDS.map((w) => ` ${w}`)];
}

/** A fake chat model that streams `replyChunks`, `delay` ms apart, as one message with a stable id. */
class SlowEchoModel extends BaseChatModel {
  constructor(private readonly delay: number) {
    super({});
  }

  _llmType(): string {
    return "slow-echo";
  }

  override async *_streamResponseChunks(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    const id = `ai-${messages.length}`;
    for (const [index, text] of replyChunks(messages).entries()) {
      if (index > 0) await wait(this.delay, undefined, { signal: options.signal });
      const chunk = new ChatGenerationChunk({ message: new AIMessageChunk({ id, content: text }), text });
      yield chunk;
      await runManager?.handleLLMNewToken(text, undefined, undefined, undefined, undefined, { chunk });
    }
  }

  async _generate(messages: BaseMessage[], options: this["ParsedCallOptions"], runManager?: CallbackManagerForLLMRun): Promise<ChatResult> {
    let text = "";
    for await (const chunk of this._streamResponseChunks(messages, options, runManager)) text += chunk.text;
    return { generations: [{ text, message: new AIMessage({ id: `ai-${messages.length}`, content: text }) }] };
  }
}

const State = new StateSchema({ messages: MessagesValue });

export const graph = new StateGraph(State)
  .addNode("model", async (state, config: LangGraphRunnableConfig): Promise<Partial<typeof State.State>> => {
    const configured = Number(config.configurable?.delay ?? 250);
    const model = new SlowEchoModel(Number.isFinite(configured) && configured >= 0 ? configured : 250);
    const reply = await model.invoke(state.messages, config);
    return { messages: [new AIMessage({ id: `ai-${state.messages.length}`, content: contentText(reply.content) })] };
  })
  .addEdge(START, "model")
  .addEdge("model", END)
  .compile();
graph.name = "chat";
