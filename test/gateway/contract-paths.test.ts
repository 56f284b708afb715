/**
 * Contract paths (interface 2.9, 4.2 contract canaries rule 1; svc-gateway(5) CONFIGURATION):
 * a contract's fields are dotted paths into the response, and a numeric segment indexes a
 * list, so a probe can hold a sqlite select's first row (or an http answer's first item) to
 * a shape, not only the list.
 */
import { describe, expect, it } from 'vitest';
import { checkContract } from '../../src/gateway/contract.js';

describe('contract paths (interface 2.9; svc-gateway(5))', () => {
  it('a numeric segment indexes a list: rows.0.email of a sqlite select', () => {
    const response = { rows: [{ id: 1, email: 'a@x.io' }] };
    expect(checkContract({ rows: 'list', 'rows.0.id': 'number', 'rows.0.email': 'string' }, response)).toEqual({ missing: [], type_mismatch: [], unexpected_required: [] });
    // A renamed column shows up in the diff, field by field.
    expect(checkContract({ 'rows.0.email': 'string' }, { rows: [{ id: 1, mail: 'a@x.io' }] }).missing).toEqual(['rows.0.email']);
    expect(checkContract({ 'rows.0.id': 'string' }, response).type_mismatch).toEqual([{ field: 'rows.0.id', expected: 'string', actual: 'number' }]);
  });

  it('an http answer that is a list: json.0.id', () => {
    expect(checkContract({ 'json.0.id': 'number', 'json.1.name': 'string' }, { status: 200, json: [{ id: 1 }, { name: 'b' }] }).missing).toEqual([]);
  });

  it('an index past the end, or not a plain index, is missing; objects keep their keys', () => {
    const response = { rows: [{ id: 1 }], obj: { '0': { id: 2 } } };
    expect(checkContract({ 'rows.1.id': 'number', 'rows.01.id': 'number', 'rows.-1.id': 'number', 'rows.x': 'number' }, response).missing).toEqual(['rows.1.id', 'rows.01.id', 'rows.-1.id', 'rows.x']);
    expect(checkContract({ 'obj.0.id': 'number' }, response).missing).toEqual([]);
    expect(checkContract({ 'rows.0': 'object' }, { rows: [] }).missing).toEqual(['rows.0']);
  });
});
