// A msgpack decoder for baton's records (kv.RunRecord, kv.SessionRecord):
// maps, arrays, strings, numbers, booleans, binaries (Uint8Array) and
// timestamps (extension -1, as Date). Integers past 2^53 lose precision.

export class MsgpackError extends Error {}

export function decodeMsgpack(buf: Uint8Array): unknown {
  const d = new Decoder(buf);
  const v = d.value();
  if (d.pos !== buf.length) {
    throw new MsgpackError(`msgpack: ${buf.length - d.pos} bytes after the value`);
  }
  return v;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

class Decoder {
  pos = 0;
  private view: DataView;
  private depth = 0;
  constructor(private buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  private need(n: number): number {
    const p = this.pos;
    if (p + n > this.buf.length) {
      throw new MsgpackError("msgpack: truncated");
    }
    this.pos += n;
    return p;
  }
  private u8(): number { return this.view.getUint8(this.need(1)); }
  private u16(): number { return this.view.getUint16(this.need(2)); }
  private u32(): number { return this.view.getUint32(this.need(4)); }
  private u64(): number { return Number(this.view.getBigUint64(this.need(8))); }
  private i64(): number { return Number(this.view.getBigInt64(this.need(8))); }
  private bytes(n: number): Uint8Array {
    const p = this.need(n);
    return this.buf.slice(p, p + n);
  }
  private str(n: number): string {
    const p = this.need(n);
    return utf8.decode(this.buf.subarray(p, p + n));
  }
  value(): unknown {
    if (++this.depth > 100) {
      throw new MsgpackError("msgpack: nested too deep");
    }
    try {
      return this.one();
    } finally {
      this.depth--;
    }
  }
  private one(): unknown {
    const b = this.u8();
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    if ((b & 0xf0) === 0x80) return this.map(b & 0x0f);
    if ((b & 0xf0) === 0x90) return this.array(b & 0x0f);
    if ((b & 0xe0) === 0xa0) return this.str(b & 0x1f);
    switch (b) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: return this.bytes(this.u8());
      case 0xc5: return this.bytes(this.u16());
      case 0xc6: return this.bytes(this.u32());
      case 0xc7: { const n = this.u8(); return this.ext(this.view.getInt8(this.need(1)), n); }
      case 0xc8: { const n = this.u16(); return this.ext(this.view.getInt8(this.need(1)), n); }
      case 0xc9: { const n = this.u32(); return this.ext(this.view.getInt8(this.need(1)), n); }
      case 0xca: return this.view.getFloat32(this.need(4));
      case 0xcb: return this.view.getFloat64(this.need(8));
      case 0xcc: return this.u8();
      case 0xcd: return this.u16();
      case 0xce: return this.u32();
      case 0xcf: return this.u64();
      case 0xd0: return this.view.getInt8(this.need(1));
      case 0xd1: return this.view.getInt16(this.need(2));
      case 0xd2: return this.view.getInt32(this.need(4));
      case 0xd3: return this.i64();
      case 0xd4: return this.ext(this.view.getInt8(this.need(1)), 1);
      case 0xd5: return this.ext(this.view.getInt8(this.need(1)), 2);
      case 0xd6: return this.ext(this.view.getInt8(this.need(1)), 4);
      case 0xd7: return this.ext(this.view.getInt8(this.need(1)), 8);
      case 0xd8: return this.ext(this.view.getInt8(this.need(1)), 16);
      case 0xd9: return this.str(this.u8());
      case 0xda: return this.str(this.u16());
      case 0xdb: return this.str(this.u32());
      case 0xdc: return this.array(this.u16());
      case 0xdd: return this.array(this.u32());
      case 0xde: return this.map(this.u16());
      case 0xdf: return this.map(this.u32());
    }
    throw new MsgpackError(`msgpack: unknown type byte 0x${b.toString(16)}`);
  }
  private array(n: number): unknown[] {
    const out: unknown[] = [];
    for (let i = 0; i < n; i++) out.push(this.value());
    return out;
  }
  private map(n: number): Record<string, unknown> {
    const out: Record<string, unknown> = Object.create(null);
    for (let i = 0; i < n; i++) {
      const k = this.value();
      out[typeof k === "string" ? k : String(k)] = this.value();
    }
    return out;
  }
  private ext(type: number, n: number): unknown {
    const p = this.need(n);
    if (type !== -1) {
      return { type, data: this.buf.slice(p, p + n) };
    }
    let sec: number, nsec: number;
    if (n === 4) {
      sec = this.view.getUint32(p);
      nsec = 0;
    } else if (n === 8) {
      const hi = this.view.getUint32(p), lo = this.view.getUint32(p + 4);
      nsec = hi >>> 2;
      sec = (hi & 0x3) * 2 ** 32 + lo;
    } else if (n === 12) {
      nsec = this.view.getUint32(p);
      sec = Number(this.view.getBigInt64(p + 4));
    } else {
      throw new MsgpackError(`msgpack: timestamp of ${n} bytes`);
    }
    return new Date(sec * 1000 + Math.floor(nsec / 1e6));
  }
}
