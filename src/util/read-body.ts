/**
 * A fetch response's body read into memory up to `limit` bytes. An upstream or a provider
 * decides how much it sends, so nothing is read past the limit: `whole` is false when the body
 * is longer (or declares itself longer), `bytes` then holds at most its first `limit` bytes and
 * the rest is cancelled, which ends the download. `stopped` is asked before every chunk; an
 * error it returns cancels the body and is thrown.
 */
export async function readBodyUpTo(res: Response, limit: number, stopped?: () => Error | undefined): Promise<{ bytes: Buffer; whole: boolean }> {
  if (!res.body) return { bytes: Buffer.alloc(0), whole: true };
  const reader = res.body.getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    cancel();
    return { bytes: Buffer.alloc(0), whole: false };
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const stop = stopped?.();
    if (stop) {
      cancel();
      throw stop;
    }
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.byteLength > limit) {
      chunks.push(value.subarray(0, limit - size));
      cancel();
      return { bytes: Buffer.concat(chunks), whole: false };
    }
    size += value.byteLength;
    chunks.push(value);
  }
  return { bytes: Buffer.concat(chunks), whole: true };
}
