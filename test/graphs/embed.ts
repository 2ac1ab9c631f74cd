/**
 * An offline embedding function for `store.index` (no network): one dimension per word of a
 * small vocabulary, holding how often the word occurs. Texts about the same animals point the same way.
 */
export const VOCABULARY = ["cat", "dog", "fish", "bird", "car", "train", "plane", "boat"];

export async function embed(texts: string[]): Promise<number[][]> {
  return texts.map((text) => {
    const words = text.toLowerCase().match(/[a-z]+/g) ?? [];
    return VOCABULARY.map((w) => words.filter((x) => x === w || x === `${w}s`).length);
  });
}
