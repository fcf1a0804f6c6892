// The typed low-level request: any operation of docs/openapi.yaml by its method and path
// template, with its path/query parameters, body and answer typed from the generated `paths`.
import type { paths } from "./openapi.js";

/** The methods the API uses. */
export type HttpMethod = "get" | "put" | "post" | "patch" | "delete";

/** The operation of `path` and `method` (never when the path has no such method). */
export type Operation<P extends keyof paths, M extends HttpMethod> = NonNullable<paths[P][M]>;

/** The path templates that have `method`. */
export type PathsWith<M extends HttpMethod> = {
  [P in keyof paths]: [Operation<P, M>] extends [never] ? never : P;
}[keyof paths];

/** The path templates served by an agent's Durable Object (under `/agents/{agent}`). */
export type AgentPathsWith<M extends HttpMethod> = Extract<PathsWith<M>, `/agents/{agent}${string}`>;

type PathParams<O> = O extends { parameters: { path: infer X } } ? X : never;
type QueryParams<O> = O extends { parameters: { query?: infer X } } ? NonNullable<X> : never;
type HeaderParams<O> = O extends { parameters: { header?: infer X } } ? NonNullable<X> : never;
type BodyOf<O> = O extends { requestBody?: infer B } ? (B extends { content: infer C } ? C[keyof C] : never) : never;

/** `{K: T}`, optional when T has no required key, absent when T is never. */
type Field<K extends string, T> = [T] extends [never]
  ? { [_ in K]?: never }
  : {} extends T ? { [_ in K]?: T } : { [_ in K]: T };

type Without<T, K extends string> = [T] extends [never] ? never : Omit<T, K>;

/**
 * The options of one operation: `path` (its path parameters, minus `Omitted`), `query`, `body`
 * (required where the spec requires it), `headers` (required where the operation has a
 * required header parameter, e.g. `Confirm: erase`) and an abort `signal`.
 */
export type RequestOptions<O, Omitted extends string = never> = Field<"path", Without<PathParams<O>, Omitted>> &
  Field<"query", QueryParams<O>> &
  ([BodyOf<O>] extends [never]
    ? { body?: never }
    : O extends { requestBody: unknown } ? { body: BodyOf<O> } : { body?: BodyOf<O> }) &
  ([HeaderParams<O>] extends [never]
    ? { headers?: Record<string, string> }
    : { headers: HeaderParams<O> & Record<string, string> }) & {
    signal?: AbortSignal;
  };

/** The options argument, optional when nothing in it is required. */
export type OptionsArg<O, Omitted extends string = never> = {} extends RequestOptions<O, Omitted>
  ? [options?: RequestOptions<O, Omitted>]
  : [options: RequestOptions<O, Omitted>];

type ContentOf<R> = R extends { content: infer C }
  ? "application/json" extends keyof C ? C["application/json"] : C[keyof C]
  : undefined;

/**
 * What a successful answer parses to: the JSON of its 2xx answers (text for text and NDJSON
 * answers, `undefined` for `204`).
 */
export type SuccessOf<O> = O extends { responses: infer R }
  ? { [S in keyof R]: S extends 200 | 201 | 202 | 204 ? ContentOf<R[S]> : never }[keyof R]
  : never;

/** The untyped shape the runtime works with. */
export interface LooseOptions {
  path?: Record<string, string | number | undefined>;
  query?: Record<string, unknown>;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** `template` with its `{name}` parameters filled in, percent-encoded. */
export function fillPath(template: string, params: Record<string, unknown>): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined || v === null) throw new TypeError(`${template}: the path parameter ${name} is missing`);
    return encodeURIComponent(String(v));
  });
}

/** `?a=1&b=2` of the defined values (arrays repeat the name), or "". */
export function queryString(query: Record<string, unknown> | undefined): string {
  if (!query) return "";
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    for (const item of Array.isArray(v) ? v : [v]) {
      if (item !== undefined && item !== null) qs.append(k, String(item));
    }
  }
  const s = qs.toString();
  return s ? `?${s}` : "";
}

/** The body of a successful answer: JSON, text, or undefined when empty. */
export async function parseBody(res: Response): Promise<unknown> {
  if (res.status === 204) return undefined;
  const text = await res.text();
  if (!text) return undefined;
  const type = res.headers.get("content-type") ?? "";
  return /\bjson\b/i.test(type) && !/ndjson/i.test(type) ? JSON.parse(text) : text;
}
