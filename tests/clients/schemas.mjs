// The JSON Schemas the structured-output tests use (server_agents.mjs, json_schema_cli.mjs): ten
// covering the supported subset, each bounded or ended in time by the token budget.
export const str = (maxLength, extra = {}) => ({ type: 'string', maxLength, ...extra });
export const closed = (properties, required = Object.keys(properties)) =>
  ({ type: 'object', properties, required, additionalProperties: false });

export const SCHEMAS = {
  person: closed({ name: str(20, { minLength: 1 }), age: { type: 'integer', minimum: 0, maximum: 120 }, email: { type: 'string', format: 'email' } }, ['name', 'age']),
  palette: closed({ color: { enum: ['red', 'green', 'blue', 'cyan'] }, shade: { const: 'dark' }, weight: { enum: [1, 2.5, null, true] } }),
  tags: closed({ tags: { type: 'array', items: str(8), minItems: 1, maxItems: 4 } }),
  nested: closed({ a: closed({ b: closed({ c: closed({ d: { type: 'integer', minimum: -3, maximum: 3 } }) }) }) }),
  any_of: closed({ value: { anyOf: [{ type: 'integer', minimum: -5, maximum: 5 }, str(5), { type: 'null' }] } }),
  numbers: closed({ x: { type: 'number', minimum: -1.5, maximum: 2.25 }, y: { type: 'number', exclusiveMinimum: 0, maximum: 1 }, n: { type: 'integer', minimum: 1000, maximum: 1050 } }),
  refs: { $defs: { point: closed({ x: { type: 'integer', minimum: 0, maximum: 9 }, y: { type: 'integer', minimum: 0, maximum: 9 } }) },
    ...closed({ from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } }) },
  flags: closed({ ok: { type: 'boolean' }, nothing: { type: 'null' }, maybe: { type: ['boolean', 'null'] } }),
  patterned: closed({ code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' }, word: str(6, { minLength: 2 }), day: { type: 'string', format: 'date' } }),
  tree: { $defs: { node: closed({ v: { type: 'integer', minimum: 0, maximum: 99 }, kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } }) },
    $ref: '#/$defs/node' },
};
