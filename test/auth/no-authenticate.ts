/** An Auth instance with authorization handlers but no authenticate(): refused at start. */
import { Auth } from "@langchain/langgraph-sdk/auth";

export const auth = new Auth().on("*", () => true);
