// Go's 64-bit FNV-1a (projector.go's fnvAdd), in four 16-bit limbs.

/** The FNV-1a offset basis. */
export const fnvOffset = 14695981039346656037n;

/** fnvAdd extends the FNV-1a hash h with the bytes b. */
export function fnvAdd(h: bigint, b: Uint8Array): bigint {
  if (b.length === 0) return h;
  let h0 = Number(h & 0xffffn);
  let h1 = Number((h >> 16n) & 0xffffn);
  let h2 = Number((h >> 32n) & 0xffffn);
  let h3 = Number((h >> 48n) & 0xffffn);
  for (let i = 0; i < b.length; i++) {
    h0 ^= b[i]!;
    // h *= 2^40 + 0x1b3 (mod 2^64)
    const t0 = h0 * 0x1b3;
    const t1 = h1 * 0x1b3 + (t0 >>> 16);
    const t2 = h2 * 0x1b3 + (h0 << 8) + (t1 >>> 16);
    const t3 = h3 * 0x1b3 + (h1 << 8) + (t2 >>> 16);
    h0 = t0 & 0xffff;
    h1 = t1 & 0xffff;
    h2 = t2 & 0xffff;
    h3 = t3 & 0xffff;
  }
  return (BigInt(h3) << 48n) | (BigInt(h2) << 32n) | (BigInt(h1) << 16n) | BigInt(h0);
}
