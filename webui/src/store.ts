// Conversations and settings, kept in the browser's localStorage; export and import in the
// OpenAI messages format ({"title", "messages": [{"role", "content", "reasoning_content"?}]}).
import type { ChatMessage, Stats } from './api';

export interface Message {
  role: 'system' | 'user' | 'assistant';
  content: string;
  reasoning?: string;
  stats?: Stats;
  error?: string;
  stopped?: boolean;
}

export interface Conversation {
  id: string;
  title: string;
  messages: Message[];
  updated: number;
}

// Fields left empty use the server's defaults.
export interface Settings {
  system: string;
  temperature: string;
  top_p: string;
  top_k: string;
  max_tokens: string;
  seed: string;
  thinking: boolean;
}

export const DEFAULT_SETTINGS: Settings = {
  system: '',
  temperature: '',
  top_p: '',
  top_k: '',
  max_tokens: '',
  seed: '',
  thinking: true,
};

export const NEW_TITLE = 'New chat';
const CONVERSATIONS_ITEM = 'kipp.conversations';
const CURRENT_ITEM = 'kipp.current';
const SETTINGS_ITEM = 'kipp.settings';

function read<T>(item: string, fallback: T): T {
  try {
    const text = localStorage.getItem(item);
    return text === null ? fallback : (JSON.parse(text) as T);
  } catch {
    return fallback;
  }
}

export const newId = (): string => crypto.randomUUID();

export const loadConversations = (): Conversation[] => {
  const list = read<unknown>(CONVERSATIONS_ITEM, []);
  return Array.isArray(list) ? (list as Conversation[]) : [];
};
export const saveConversations = (list: Conversation[]) =>
  localStorage.setItem(CONVERSATIONS_ITEM, JSON.stringify(list));
export const loadCurrent = (): string => localStorage.getItem(CURRENT_ITEM) ?? '';
export const saveCurrent = (id: string) => localStorage.setItem(CURRENT_ITEM, id);
export const loadSettings = (): Settings => ({ ...DEFAULT_SETTINGS, ...read<Partial<Settings>>(SETTINGS_ITEM, {}) });
export const saveSettings = (s: Settings) => localStorage.setItem(SETTINGS_ITEM, JSON.stringify(s));

export function titleOf(text: string): string {
  const line = text.trim().split('\n')[0] ?? '';
  return line.length > 40 ? `${line.slice(0, 40)}…` : line || NEW_TITLE;
}

// The messages as the API takes them.
export function toChatMessages(messages: Message[]): ChatMessage[] {
  return messages.map((m) => ({ role: m.role, content: m.content }));
}

export function exportJson(c: Conversation): string {
  const messages = c.messages.map((m) =>
    m.reasoning ? { role: m.role, content: m.content, reasoning_content: m.reasoning } : { role: m.role, content: m.content },
  );
  return JSON.stringify({ title: c.title, messages }, null, 2);
}

function importMessages(value: unknown): Message[] {
  if (!Array.isArray(value)) throw new Error('"messages" must be a list');
  return value.map((m: any, i) => {
    if (!m || !['system', 'user', 'assistant'].includes(m.role))
      throw new Error(`message ${i + 1}: role must be system, user or assistant`);
    if (typeof m.content !== 'string') throw new Error(`message ${i + 1}: content must be a string`);
    const message: Message = { role: m.role, content: m.content };
    if (typeof m.reasoning_content === 'string' && m.reasoning_content) message.reasoning = m.reasoning_content;
    return message;
  });
}

// A file holding {"title"?, "messages"}, a list of those, or a bare list of messages.
export function importJson(text: string): Conversation[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error('the file is not JSON');
  }
  const one = (v: any): Conversation => {
    const messages = importMessages(v?.messages);
    const firstUser = messages.find((m) => m.role === 'user');
    const title = typeof v?.title === 'string' && v.title ? v.title : titleOf(firstUser?.content ?? '');
    return { id: newId(), title, messages, updated: Date.now() };
  };
  if (Array.isArray(value) && value.every((v) => v && typeof v === 'object' && 'role' in v))
    return [one({ messages: value })];
  if (Array.isArray(value)) return value.map(one);
  return [one(value)];
}
