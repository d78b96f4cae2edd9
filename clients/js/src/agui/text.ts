// UTF-8 from the platform (browsers and Node have TextEncoder and
// TextDecoder), typed here so that no DOM or Node typings are needed.

interface Encoder {
  encode(s: string): Uint8Array;
}
interface Decoder {
  decode(b: Uint8Array): string;
}
const g = globalThis as unknown as {
  TextEncoder: new () => Encoder;
  TextDecoder: new (label: string, opts: { fatal: boolean; ignoreBOM: boolean }) => Decoder;
};

export const utf8Encoder: Encoder = new g.TextEncoder();
/** Throws on invalid UTF-8. */
export const strictUTF8Decoder: Decoder = new g.TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
