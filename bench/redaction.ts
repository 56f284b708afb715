/**
 * Redaction: what scanning a text for every spelling of the gateway's secrets costs
 * (`Redactor.redact`, src/log/logger.ts: one Aho-Corasick pass over some 60 spellings a secret,
 * plus the JSON-unescape views where the text has backslashes), on texts a gateway answers and
 * logs: a 2 KB JSON answer, a 64 KB and a 1 MB body with no secret in them, and the 1 MB body
 * holding one. The baseline, measured in the same run on the same texts, is the floor a
 * redactor of the values as written could reach: one native `String.prototype.includes` per
 * secret value, no spelling, no replacement.
 */
import { Redactor } from '../src/log/logger.js';
import { registerSecret } from '../src/log/secret-spellings.js';
import { throughput, type Benchmark, type Row } from './lib/harness.js';

/** Four credentials a gateway config typically holds: a bearer token, an API key, a Basic password, a PEM key. */
const SECRETS = [
  'tok_live_4f9a2c7e1b8d3f60a5e4c2b1',
  'sk-proj-Zq8vN2mXr5TkLw9YbHc3JdPf',
  'Hunter2!x9',
  `-----BEGIN PRIVATE KEY-----\n${'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC'.repeat(50)}\n-----END PRIVATE KEY-----`,
];

/** A JSON answer of about `bytes`: rows of invoice-like records, ASCII with a few escapes. */
function answer(bytes: number): string {
  const rows: unknown[] = [];
  let text = '';
  for (let i = 0; text.length < bytes; i++) {
    rows.push({ id: `inv_${1000 + i}`, customer: `Customer ${i} "Ltd"`, amount: 100 + i * 7.5, note: `refund requested on 2026-11-${String((i % 28) + 1).padStart(2, '0')}\tpath C:\\exports\\${i}` });
    text = JSON.stringify({ rows });
  }
  return text;
}

export const redactionBenchmark: Benchmark = {
  name: 'redaction',
  description: 'MB/s scanned for every spelling of four secrets (Redactor.redact), 2 KB to 1 MB texts',
  async run(ctx): Promise<Row[]> {
    const red = new Redactor();
    for (const s of SECRETS) registerSecret(red, s);
    ctx.log(`${red.size} spellings of ${SECRETS.length} secrets`);
    const large = answer(ctx.quick ? 256 * 1024 : 1024 * 1024);
    const texts: Array<[string, string]> = [
      ['2 KB answer', answer(2 * 1024)],
      ['64 KB answer', answer(64 * 1024)],
      [`${Math.round(large.length / 1024)} KB answer`, large],
      [`${Math.round(large.length / 1024)} KB answer, one secret in it`, large.slice(0, large.length >> 1) + Buffer.from(SECRETS[0]!).toString('base64') + large.slice(large.length >> 1)],
    ];
    const rows: Row[] = [];
    for (const [label, text] of texts) {
      // Enough repetitions that a round takes tens of milliseconds.
      const reps = Math.max(1, Math.round((8 * 1024 * 1024) / text.length / (ctx.quick ? 4 : 1)));
      const mb = (text.length * reps) / 1e6;
      const floor = `${label}: includes of each value (floor)`;
      let sink = 0;
      rows.push({
        label: floor,
        unit: 'MB/s',
        better: 'higher',
        samples: await throughput(ctx.rounds, mb, async () => {
          for (let i = 0; i < reps; i++) for (const s of SECRETS) if (text.includes(s)) sink++;
        }),
      });
      rows.push({
        label: `${label}: redact`,
        unit: 'MB/s',
        better: 'higher',
        baseline: floor,
        samples: await throughput(ctx.rounds, mb, async () => {
          for (let i = 0; i < reps; i++) sink += red.redact(text).length;
        }),
      });
      if (sink < 0) throw new Error('unreachable: keeps the loops from being optimised away');
    }
    return rows;
  },
};
