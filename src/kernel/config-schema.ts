/**
 * The JSON Schema of the kernel: section of svcd's config (svcd(8) CONFIGURATION), and the
 * bounds it holds. Data only: src/validators/compiled/kernel-config.ts holds its validator,
 * compiled ahead of time (docs/design.md "Validators compiled ahead of time").
 */

/** Most clock skew svcd accepts, seconds (a day). */
export const MAX_CLOCK_SKEW_SECONDS = 86_400;

/** What kernel.store and --store take: a PostgreSQL URL (SQLite needs no setting). */
export const POSTGRES_URL_PATTERN = '^postgres(ql)?://';

export const KERNEL_SECTION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    listen: { type: 'string', minLength: 1 },
    data_dir: { type: 'string', minLength: 1 },
    token: { type: ['string', 'null'], minLength: 1 },
    publishers: {
      type: 'array',
      items: { type: 'object', additionalProperties: false, required: ['key_id', 'public_key'], properties: { key_id: { type: 'string', minLength: 1 }, public_key: { type: 'string', minLength: 1 } } },
    },
    synchronous: { enum: ['OFF', 'NORMAL', 'FULL', 'EXTRA'] },
    store: { type: ['string', 'null'], pattern: POSTGRES_URL_PATTERN },
    clock_skew_seconds: { type: 'integer', minimum: 0, maximum: MAX_CLOCK_SKEW_SECONDS },
    // null as for token: the man page's sample shows each default, and a copy of it must load.
    gateway_url: { type: ['string', 'null'], pattern: '^https?://' },
  },
} as const;
