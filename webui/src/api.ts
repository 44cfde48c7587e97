// The server's HTTP API as the page uses it: /v1/models for the name and context length, and
// streamed /v1/chat/completions (SSE) with the `usage` and `timings` objects of the last chunk.
// The API key, when the server wants one, lives in localStorage and goes out as a Bearer token.

export interface ModelInfo {
  id: string;
  contextLength: number | null;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number };
}

export interface Timings {
  cache_n: number;
  prompt_n: number;
  prompt_ms: number;
  prompt_per_second: number;
  predicted_n: number;
  predicted_ms: number;
  predicted_per_second: number;
  queue_ms: number;
}

export interface Stats {
  usage?: Usage;
  timings?: Timings;
  finishReason?: string;
}

export interface ChatMessage {
  role: string;
  content: string;
}

export interface ChatParams {
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  top_p?: number;
  top_k?: number;
  max_tokens?: number;
  seed?: number;
  thinking: boolean;
}

export interface StreamHandlers {
  content(text: string): void;
  reasoning(text: string): void;
  stats(stats: Stats): void;
}

// The server refused the key (HTTP 401).
export class AuthError extends Error {}

const KEY_ITEM = 'kipp.apiKey';

export const apiKey = {
  get: (): string => localStorage.getItem(KEY_ITEM) ?? '',
  set: (key: string) => localStorage.setItem(KEY_ITEM, key),
  clear: () => localStorage.removeItem(KEY_ITEM),
};

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const key = apiKey.get();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function errorOf(res: Response): Promise<Error> {
  let message = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (typeof body?.error?.message === 'string') message = body.error.message;
  } catch {
    // not JSON: the status says enough
  }
  return res.status === 401 ? new AuthError(message) : new Error(message);
}

export async function fetchModels(): Promise<ModelInfo[]> {
  const res = await fetch('/v1/models', { headers: headers() });
  if (!res.ok) throw await errorOf(res);
  const body = await res.json();
  const data: unknown[] = Array.isArray(body?.data) ? body.data : [];
  return data.map((m: any) => ({
    id: String(m?.id ?? ''),
    contextLength: typeof m?.meta?.n_ctx === 'number' ? m.meta.n_ctx : null,
  }));
}

function requestBody(p: ChatParams): object {
  const body: Record<string, unknown> = {
    model: p.model,
    messages: p.messages,
    stream: true,
    stream_options: { include_usage: true },
    chat_template_kwargs: { enable_thinking: p.thinking },
  };
  for (const key of ['temperature', 'top_p', 'top_k', 'max_tokens', 'seed'] as const)
    if (p[key] !== undefined) body[key] = p[key];
  return body;
}

// One SSE event's data: a chunk, the usage chunk, an error object or [DONE] (true: the end).
function handleData(data: string, on: StreamHandlers): boolean {
  if (data === '[DONE]') return true;
  const chunk = JSON.parse(data);
  if (chunk?.error) throw new Error(String(chunk.error.message ?? 'the server reported an error'));
  const choice = chunk?.choices?.[0];
  if (choice) {
    const delta = choice.delta ?? {};
    // --reasoning-field both sends the same text under both names: take one.
    const thought = delta.reasoning_content ?? delta.reasoning;
    if (typeof thought === 'string' && thought) on.reasoning(thought);
    if (typeof delta.content === 'string' && delta.content) on.content(delta.content);
    if (choice.finish_reason) on.stats({ finishReason: String(choice.finish_reason) });
  }
  if (chunk?.usage) on.stats({ usage: chunk.usage, timings: chunk.timings });
  return false;
}

export async function streamChat(params: ChatParams, signal: AbortSignal, on: StreamHandlers): Promise<void> {
  const res = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json' }),
    body: JSON.stringify(requestBody(params)),
    signal,
  });
  if (!res.ok || !res.body) throw await errorOf(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the server closed the stream before it ended');
    buffer += value;
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue; // ": ping" comments keep the connection alive
        if (handleData(line.slice(5).trim(), on)) {
          await reader.cancel();
          return;
        }
      }
    }
  }
}
