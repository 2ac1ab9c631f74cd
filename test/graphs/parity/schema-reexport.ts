/** `reexported`: a graph this file only re-exports under another name (no local binding to take `typeof` of). */
export { nested as reexported } from "./schema-types.js";
