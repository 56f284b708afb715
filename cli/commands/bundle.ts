/**
 * `svc bundle`: signed workflow bundles (interface 2.2, 4.1 rule 1; decisions 4).
 *   svc bundle validate FILE                       offline; every problem with its JSON pointer
 *   svc bundle sign FILE --key KEYFILE [-o OUT]    YAML or JSON in, {bundle, signature} JSON out
 *   svc bundle push FILE [--key KEYFILE]           signs an unsigned bundle when a key is given
 *   svc bundle list
 *   svc bundle show BUNDLE_ID
 * FILE is a bundle (YAML or JSON) or a signed document {bundle, signature}. KEYFILE is a
 * publisher key pair {key_id, public_key, private_key} as `svc keys gen` writes it.
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { Document, visit } from 'yaml';
import type { BundleSummary } from '../../src/bundle/bundle-service.js';
import { bundleId, signBundle, type BundleSignature, type PublisherKeyFile } from '../../src/bundle/sign.js';
import { inputTemplatesOutsideSchema, mockScriptNotes, modelStepsWithoutMock, quotedStringTemplates, undeclaredTools, validateBundle, type BundleProblem } from '../../src/bundle/validate.js';
import type { StoredBundle } from '../../src/types.js';
import { globals, kernelClient, output, table } from '../context.js';
import { CliError, EXIT, fsReason } from '../exit.js';
import type { SvcHttpClient } from '../http-client.js';
import { isRecord } from '../../src/util/is-record.js';
import { INVISIBLE_CHARS } from '../../src/encoding/visible-json.js';
import { resolveBundle } from './bundle-ref.js';
import { readDataFile, readDataFileProblems, UnparsableFileError } from './data-file.js';

export { readDataFile, resolveBundle, UnparsableFileError };
export { registerBundle } from '../register/bundle.js';

/** What a bundle file holds: a bundle, and its signature when the file is a signed document. */
export interface BundleFile {
  bundle: unknown;
  signature?: BundleSignature;
}

/** A bundle file, or a signed document {bundle, signature} (a bundle never has a `bundle` member). */
export function readBundleFile(file: string): BundleFile {
  return bundleFileOf(readDataFile(file));
}

function bundleFileOf(value: unknown): BundleFile {
  if (isRecord(value) && isRecord(value.bundle) && !('workflows' in value)) {
    return { bundle: value.bundle, signature: value.signature as BundleSignature | undefined };
  }
  return { bundle: value };
}

/** Reads a publisher key file {key_id, public_key, private_key}. */
export function readKeyFile(file: string): PublisherKeyFile {
  const value = readDataFile(file);
  if (!isRecord(value) || typeof value.key_id !== 'string' || typeof value.private_key !== 'string') {
    throw new CliError(`${file} is not a publisher key file {key_id, public_key, private_key} (make one with: svc keys gen -o FILE)`, EXIT.failed);
  }
  return value as unknown as PublisherKeyFile;
}

/** One line per problem: `FILE: /pointer: message`. */
export function formatProblems(file: string, problems: BundleProblem[]): string {
  return problems.map((p) => `${file}: ${p.path || '/'}: ${p.message}`).join('\n');
}

export interface ValidateResult {
  ok: boolean;
  file: string;
  problems: BundleProblem[];
  /** Tools named but not declared in `tools`: reported, never a reason to refuse. */
  warnings: BundleProblem[];
  name?: string;
  version?: string;
  bundle_id?: string;
  signed_by?: string;
}

/** What validate warns of and never refuses: an undeclared tool, a model step without a mock script, an input template its schema forbids, a mock script that would not play as meant. */
export function bundleWarnings(bundle: unknown): BundleProblem[] {
  return [...undeclaredTools(bundle), ...modelStepsWithoutMock(bundle), ...inputTemplatesOutsideSchema(bundle), ...mockScriptNotes(bundle), ...quotedStringTemplates(bundle)];
}

/**
 * sign and push check the bundle "as by svc bundle validate" (svc(1)): its warnings too, one
 * line each to `warn`, or a {{input.typo}} that fails every run is signed and pushed without a word.
 */
function warnOfBundle(file: string, bundle: unknown, warn: (line: string) => void): void {
  for (const w of bundleWarnings(bundle)) warn(`${file}: ${w.path}: warning: ${w.message}`);
}

/** Standard error, for the commands' warnings. */
const toStderr = (line: string): void => void process.stderr.write(`${line}\n`);

/** `svc bundle validate`: offline, every problem; a file that does not parse is one, at the root. */
export function handleValidate(file: string): ValidateResult {
  let read: { value: unknown; problems: BundleProblem[] };
  try {
    read = readDataFileProblems(file);
  } catch (err) {
    if (err instanceof UnparsableFileError) return { ok: false, file, problems: [{ path: err.path, message: err.reason }], warnings: [] };
    throw err;
  }
  const { bundle, signature } = bundleFileOf(read.value);
  // Pointers to values JSON cannot carry are the file's; in a signed document {bundle,
  // signature} they are made the bundle's, as the validator's are.
  const inDocument = bundle !== read.value;
  const carried = read.problems.map((p) => (inDocument && p.path.startsWith('/bundle/') ? { ...p, path: p.path.slice('/bundle'.length) } : p));
  const r = validateBundle(bundle);
  // Such a value stands in as 0 for the validator: what it says of that place is not the file's.
  const fromValidator = r.ok ? [] : r.problems.filter((p) => !carried.some((c) => c.path === p.path));
  const warnings = bundleWarnings(bundle);
  const signed = signature && typeof signature.key_id === 'string' ? { signed_by: signature.key_id } : {};
  if (carried.length > 0 || !r.ok) return { ok: false, file, problems: [...carried, ...fromValidator], warnings, ...signed };
  return { ok: true, file, problems: [], warnings, name: r.bundle.name, version: r.bundle.version, bundle_id: bundleId(r.bundle), ...signed };
}

/** `svc bundle sign`: validates, then signs JCS(bundle); returns the signed document. */
export function handleSign(file: string, keyFile: string, warn: (line: string) => void = () => {}): { bundle: unknown; signature: BundleSignature } {
  const { bundle } = readBundleFile(file);
  warnOfBundle(file, bundle, warn);
  const r = validateBundle(bundle);
  if (!r.ok) throw new CliError(`${file} is not a valid bundle; nothing signed:\n${formatProblems(file, r.problems)}`, EXIT.failed, { ok: false, problems: r.problems });
  const key = readKeyFile(keyFile);
  try {
    return { bundle, signature: signBundle(bundle, key) };
  } catch (err) {
    throw new CliError(`${keyFile}: ${(err as Error).message}`, EXIT.failed);
  }
}

export interface PushResult {
  status: 'created' | 'exists';
  bundle_id: string;
  name: string;
  version: string;
  key_id: string | null;
}

/** `svc bundle push`: signs an unsigned bundle when a key is given, then POST /v1/bundles. */
export async function handlePush(client: SvcHttpClient, file: string, keyFile?: string, warn: (line: string) => void = () => {}): Promise<PushResult> {
  const doc = readBundleFile(file);
  warnOfBundle(file, doc.bundle, warn);
  // Checked here first, signed or not: every problem at once, and nothing sent that svcd refuses.
  const checked = validateBundle(doc.bundle);
  if (!checked.ok) {
    const message = `${file} is not a valid bundle; nothing sent`;
    throw new CliError(`bundle_invalid: ${message}:\n${formatProblems(file, checked.problems)}`, EXIT.failed, {
      error: { code: 'bundle_invalid', message, details: { path: checked.problems[0]?.path ?? '', problems: checked.problems } },
    });
  }
  let body: { bundle: unknown; signature?: BundleSignature } = doc;
  if (!doc.signature && keyFile) body = handleSign(file, keyFile); // its warnings were said above
  try {
    const res = await client.request<{ bundle_id: string; name: string; version: string }>('POST', '/bundles', body, {}, ['bundle_id']);
    return { status: res.status === 201 ? 'created' : 'exists', ...res.body, key_id: body.signature?.key_id ?? null };
  } catch (err) {
    const e = err as CliError;
    const env = (e.body as { error?: { code?: string; message?: string; details?: { problems?: BundleProblem[] } } } | undefined)?.error;
    if (env?.code === 'bundle_invalid' && env.details?.problems) {
      throw new CliError(`bundle_invalid: svcd refused ${file}:\n${formatProblems(file, env.details.problems)}`, EXIT.failed, e.body);
    }
    if (env?.code === 'bundle_signature_invalid' && !body.signature) {
      throw new CliError(`bundle_signature_invalid: ${env.message} (sign it: --key KEYFILE)`, EXIT.failed, e.body);
    }
    throw err;
  }
}

export async function handleList(client: SvcHttpClient): Promise<{ bundles: BundleSummary[] }> {
  return (await client.request<{ bundles: BundleSummary[] }>('GET', '/bundles', undefined, {}, ['bundles'])).body;
}


/**
 * A stored bundle as YAML for a terminal (the characters visibleJson escapes: DEL and C1
 * controls, format characters such as bidi and zero-width ones, line separators) that is still the same bundle: a string holding an
 * invisible character is double-quoted with that character as a `\uXXXX` escape (YAML's own),
 * so a bidi override in a step's text shows as one, and the output parses back to the bundle
 * (C0 controls the yaml library escapes itself).
 */
export function visibleYaml(value: unknown): string {
  const invisible = new RegExp(INVISIBLE_CHARS.source, 'u');
  const doc = new Document(value);
  visit(doc, {
    Scalar(_key, node) {
      // A fresh /u copy: test() on the shared /g pattern would carry lastIndex between strings.
      if (typeof node.value === 'string' && invisible.test(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  // Only double-quoted scalars hold such characters now, where the escape reads back as it.
  return doc.toString({ lineWidth: 0 }).replace(INVISIBLE_CHARS, (c) => {
    const n = c.codePointAt(0)!;
    return n > 0xffff ? `\\U${n.toString(16).padStart(8, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

/** `svc bundle show REF`: a bundle id, or NAME[@VERSION] as run start takes it. */
export async function handleShow(client: SvcHttpClient, ref: string): Promise<StoredBundle> {
  const id = await resolveBundle(client, ref);
  return (await client.request<StoredBundle>('GET', `/bundles/${encodeURIComponent(id)}`)).body;
}

/**
 * What each `svc bundle` command does when it runs. The commands themselves (names, options, help
 * texts) are defined in cli/register/bundle.ts, which loads this module only when one of them
 * runs (docs/design.md, "CLI start-up").
 */
export const bundleActions = {
  validate(this: Command, file: string) {
    const r = handleValidate(file);
    for (const w of r.warnings) process.stderr.write(`${file}: ${w.path}: warning: ${w.message}\n`);
    output(this, r, (x: ValidateResult) =>
      x.ok ? `${file}: valid bundle ${x.name} ${x.version} (${x.bundle_id})${x.signed_by ? `, carries a signature by ${x.signed_by} (not checked here; svcd checks it on push)` : ''}` : formatProblems(file, x.problems),
    );
    if (!r.ok) throw new CliError(`${r.problems.length} problem${r.problems.length === 1 ? '' : 's'} in ${file}`, EXIT.failed);
  },

  sign(this: Command, file: string, o: { key: string; output?: string }) {
    const signed = handleSign(file, o.key, toStderr);
    if (!o.output) {
      process.stdout.write(JSON.stringify(signed, null, globals(this).json ? 0 : 2) + '\n');
      return;
    }
    const out = resolve(o.output);
    try {
      writeFileSync(out, JSON.stringify(signed, null, 2) + '\n');
    } catch (err) {
      throw new CliError(`cannot write ${out}: ${fsReason(err)}`, EXIT.failed);
    }
    const b = signed.bundle as { name: string; version: string };
    output(this, { file: out, bundle_id: bundleId(signed.bundle), name: b.name, version: b.version, key_id: signed.signature.key_id }, (r) =>
      `signed ${r.name} ${r.version} (${r.bundle_id}) with ${r.key_id}: wrote ${r.file}`,
    );
  },

  async push(this: Command, file: string, o: { key?: string }) {
    const r = await handlePush(kernelClient(this), file, o.key, toStderr);
    output(this, r, (x: PushResult) => `${x.status === 'created' ? 'created' : 'already stored'}: ${x.name} ${x.version} ${x.bundle_id}`);
  },

  async list(this: Command) {
    output(this, await handleList(kernelClient(this)), (r: { bundles: BundleSummary[] }) =>
      r.bundles.length === 0
        ? 'no bundles'
        : table(['BUNDLE_ID', 'NAME', 'VERSION', 'WORKFLOWS', 'SIGNED_BY', 'CREATED'], r.bundles.map((b) => [b.bundle_id, b.name, b.version, b.workflows.join(','), b.key_id, b.created_at])),
    );
  },

  async show(this: Command, id: string) {
    output(this, await handleShow(kernelClient(this), id), (b: StoredBundle) => visibleYaml(b));
  },
};
