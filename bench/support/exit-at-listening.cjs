// Preloaded (--require) by bench/support/instructions.ts: the server exits as soon as it has printed its
// listening line, so that a count of its instructions covers its start and nothing after it.
const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => {
  const written = write(chunk, ...rest);
  if (String(chunk).includes(" listening on ")) process.exit(0);
  return written;
};
