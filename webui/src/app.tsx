// The chat page: conversations in a sidebar, the selected one's messages, a composer, the
// settings panel and the API-key dialog. State lives here; store.ts keeps it in the browser.
import type { TargetedEvent } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { AuthError, apiKey, fetchModels, streamChat, type ModelInfo, type Stats } from './api';
import { Markdown } from './markdown_view';
import { statsLine } from './stats';
import {
  DEFAULT_SETTINGS,
  NEW_TITLE,
  exportJson,
  importJson,
  loadConversations,
  loadCurrent,
  loadSettings,
  newId,
  saveConversations,
  saveCurrent,
  saveSettings,
  titleOf,
  toChatMessages,
  type Conversation,
  type Message,
  type Settings,
} from './store';

const KEY_REFUSED = 'The server refused this API key.';

// A settings field as a number, or undefined (the server's default) when empty or not a number.
function numberOf(text: string): number | undefined {
  if (text.trim() === '') return undefined;
  const value = Number(text);
  return Number.isFinite(value) ? value : undefined;
}

function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function App() {
  const [conversations, setConversations] = useState<Conversation[]>(loadConversations);
  const [currentId, setCurrentId] = useState<string>(loadCurrent);
  const [settings, setSettings] = useState<Settings>(loadSettings);
  const [model, setModel] = useState<ModelInfo | null>(null);
  const [serverError, setServerError] = useState('');
  const [needKey, setNeedKey] = useState(false);
  const [keyError, setKeyError] = useState('');
  const [streamingId, setStreamingId] = useState<string | null>(null);
  const [input, setInput] = useState('');
  const [showSettings, setShowSettings] = useState(false);
  const [sidebarOpen, setSidebarOpen] = useState(false);
  const [editing, setEditing] = useState<{ index: number; text: string } | null>(null);
  const [renaming, setRenaming] = useState<{ id: string; text: string } | null>(null);
  const [notice, setNotice] = useState('');
  const controller = useRef<AbortController | null>(null);
  const messagesRef = useRef<HTMLDivElement>(null);
  const inputRef = useRef<HTMLTextAreaElement>(null);

  const current = conversations.find((c) => c.id === currentId) ?? null;

  // Saved when no answer is streaming (not once per token).
  useEffect(() => {
    if (streamingId !== null) return;
    try {
      saveConversations(conversations);
    } catch (e) {
      setNotice(`The browser did not store the conversations (${(e as Error).message}); export them to keep them.`);
    }
  }, [conversations, streamingId]);
  useEffect(() => saveCurrent(currentId), [currentId]);
  useEffect(() => saveSettings(settings), [settings]);

  const refuseKey = () => {
    const hadKey = apiKey.get() !== '';
    apiKey.clear();
    setNeedKey(true);
    setKeyError(hadKey ? KEY_REFUSED : '');
  };

  const connect = async () => {
    try {
      const models = await fetchModels();
      setModel(models[0] ?? null);
      setServerError(models.length ? '' : 'The server lists no model.');
      setNeedKey(false);
      setKeyError('');
    } catch (e) {
      if (e instanceof AuthError) refuseKey();
      else setServerError(`Cannot reach the server: ${(e as Error).message}`);
    }
  };
  useEffect(() => {
    connect();
  }, []);

  const stop = () => controller.current?.abort();
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape') return;
      stop();
      setEditing(null);
      setSidebarOpen(false);
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);

  // Follow a streaming answer while the reader is at the bottom.
  useEffect(() => {
    const box = messagesRef.current;
    if (box && box.scrollHeight - box.scrollTop - box.clientHeight < 120) box.scrollTop = box.scrollHeight;
  }, [conversations]);

  const updateConversation = (id: string, change: (c: Conversation) => Conversation) =>
    setConversations((list) => list.map((c) => (c.id === id ? change(c) : c)));
  const updateLast = (id: string, change: (m: Message) => Message) =>
    updateConversation(id, (c) => ({ ...c, messages: [...c.messages.slice(0, -1), change(c.messages[c.messages.length - 1]!)] }));

  // Streams an answer to `history` into conversation `id`.
  const generate = async (id: string, history: Message[]) => {
    if (!model) {
      setNotice(serverError || 'No model yet: the page is still asking the server.');
      return;
    }
    setNotice('');
    updateConversation(id, (c) => ({ ...c, messages: [...history, { role: 'assistant', content: '' }], updated: Date.now() }));
    const abort = new AbortController();
    controller.current = abort;
    setStreamingId(id);
    const system = settings.system.trim();
    const messages = toChatMessages(history);
    if (system && !history.some((m) => m.role === 'system')) messages.unshift({ role: 'system', content: system });
    try {
      await streamChat(
        {
          model: model.id,
          messages,
          temperature: numberOf(settings.temperature),
          top_p: numberOf(settings.top_p),
          top_k: numberOf(settings.top_k),
          max_tokens: numberOf(settings.max_tokens),
          seed: numberOf(settings.seed),
          thinking: settings.thinking,
        },
        abort.signal,
        {
          content: (text) => updateLast(id, (m) => ({ ...m, content: m.content + text })),
          reasoning: (text) => updateLast(id, (m) => ({ ...m, reasoning: (m.reasoning ?? '') + text })),
          stats: (s: Stats) => updateLast(id, (m) => ({ ...m, stats: { ...m.stats, ...s } })),
        },
      );
    } catch (e) {
      if (abort.signal.aborted) {
        updateLast(id, (m) => ({ ...m, stopped: true }));
      } else {
        if (e instanceof AuthError) refuseKey();
        updateLast(id, (m) => ({ ...m, error: (e as Error).message }));
      }
    } finally {
      controller.current = null;
      setStreamingId(null);
    }
  };

  const send = () => {
    const text = input.trim();
    if (!text || streamingId !== null) return;
    let id: string;
    let history: Message[];
    if (current) {
      id = current.id;
      history = current.messages;
      if (current.title === NEW_TITLE) updateConversation(id, (c) => ({ ...c, title: titleOf(text) }));
    } else {
      id = newId();
      history = [];
      const created: Conversation = { id, title: titleOf(text), messages: [], updated: Date.now() };
      setConversations((list) => [created, ...list]);
      setCurrentId(id);
    }
    setInput('');
    generate(id, [...history, { role: 'user', content: text }]);
  };

  const regenerate = () => {
    if (!current || streamingId !== null) return;
    const m = current.messages;
    generate(current.id, m[m.length - 1]?.role === 'assistant' ? m.slice(0, -1) : m);
  };

  const resend = () => {
    if (!current || !editing || streamingId !== null || !editing.text.trim()) return;
    const history = [...current.messages.slice(0, editing.index), { role: 'user' as const, content: editing.text.trim() }];
    setEditing(null);
    generate(current.id, history);
  };

  const select = (id: string) => {
    if (streamingId !== null) return;
    setCurrentId(id);
    setEditing(null);
    setSidebarOpen(false);
  };

  const remove = (id: string) => {
    if (streamingId === id) stop();
    setConversations((list) => list.filter((c) => c.id !== id));
    if (id === currentId) setCurrentId('');
  };

  const rename = () => {
    if (!renaming) return;
    const title = renaming.text.trim();
    if (title) updateConversation(renaming.id, (c) => ({ ...c, title }));
    setRenaming(null);
  };

  const importFile = async (e: TargetedEvent<HTMLInputElement>) => {
    const file = e.currentTarget.files?.[0];
    e.currentTarget.value = '';
    if (!file) return;
    try {
      const imported = importJson(await file.text());
      setConversations((list) => [...imported, ...list]);
      setCurrentId(imported[0]!.id);
      setNotice('');
    } catch (err) {
      setNotice(`Import failed: ${(err as Error).message}`);
    }
  };

  const submitKey = (e: Event) => {
    e.preventDefault();
    const field = (e.currentTarget as HTMLFormElement).elements.namedItem('key') as HTMLInputElement;
    apiKey.set(field.value.trim());
    connect();
  };

  const onComposerKey = (e: KeyboardEvent) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  };

  const setting = (key: keyof Settings) => (e: TargetedEvent<HTMLInputElement | HTMLTextAreaElement>) =>
    setSettings({ ...settings, [key]: e.currentTarget.value });

  const streaming = streamingId !== null;
  const messages = current?.messages ?? [];

  return (
    <div class={`layout${sidebarOpen ? ' sidebar-open' : ''}`}>
      <nav class="sidebar" aria-label="Conversations">
        <div class="sidebar-actions">
          <button type="button" class="new-chat" onClick={() => select('')} disabled={streaming}>
            New chat
          </button>
          <label class="button import">
            Import
            <input type="file" accept="application/json,.json" onChange={importFile} />
          </label>
        </div>
        <ul class="conversations">
          {conversations.map((c) => (
            <li key={c.id} class={c.id === currentId ? 'active' : ''}>
              {renaming?.id === c.id ? (
                <input
                  class="rename-input"
                  value={renaming.text}
                  autoFocus
                  onInput={(e) => setRenaming({ id: c.id, text: e.currentTarget.value })}
                  onKeyDown={(e) => e.key === 'Enter' && rename()}
                  onBlur={rename}
                />
              ) : (
                <button type="button" class="title" onClick={() => select(c.id)} title={c.title}>
                  {c.title}
                </button>
              )}
              <button type="button" class="icon rename" title="Rename" onClick={() => setRenaming({ id: c.id, text: c.title })}>
                ✎
              </button>
              <button type="button" class="icon delete" title="Delete" onClick={() => remove(c.id)}>
                ×
              </button>
            </li>
          ))}
        </ul>
      </nav>
      <div class="scrim" onClick={() => setSidebarOpen(false)} />
      <main class="chat">
        <header class="topbar">
          <button type="button" class="icon menu" title="Conversations" onClick={() => setSidebarOpen(!sidebarOpen)}>
            ☰
          </button>
          <div class="model">
            <span class="model-name">{model?.id ?? 'Kipp'}</span>
            {model?.contextLength ? <span class="context">context {model.contextLength.toLocaleString('en-US')}</span> : null}
          </div>
          {current ? (
            <button type="button" class="export" onClick={() => download(`${current.title}.json`, exportJson(current))}>
              Export
            </button>
          ) : null}
          <button type="button" class="settings-toggle" onClick={() => setShowSettings(!showSettings)}>
            Settings
          </button>
        </header>
        {serverError ? <div class="banner error">{serverError}</div> : null}
        {notice ? <div class="banner notice">{notice}</div> : null}
        <div class="messages" ref={messagesRef}>
          {messages.length === 0 ? <p class="empty">Ask something. Enter sends, Shift+Enter adds a line, Esc stops.</p> : null}
          {messages.map((m, i) => {
            const last = i === messages.length - 1;
            const live = streaming && streamingId === current?.id && last;
            if (m.role !== 'assistant')
              return (
                <div class={`message ${m.role}`} key={i}>
                  {editing?.index === i ? (
                    <div class="edit-box">
                      <textarea
                        value={editing.text}
                        onInput={(e) => setEditing({ index: i, text: e.currentTarget.value })}
                        onKeyDown={(e) => {
                          if (e.key === 'Enter' && !e.shiftKey) {
                            e.preventDefault();
                            resend();
                          }
                        }}
                      />
                      <button type="button" class="resend" onClick={resend}>
                        Send
                      </button>
                      <button type="button" onClick={() => setEditing(null)}>
                        Cancel
                      </button>
                    </div>
                  ) : (
                    <>
                      <div class="text">{m.content}</div>
                      {m.role === 'user' && !streaming ? (
                        <button type="button" class="link edit" onClick={() => setEditing({ index: i, text: m.content })}>
                          Edit
                        </button>
                      ) : null}
                    </>
                  )}
                </div>
              );
            return (
              <div class={`message assistant${live ? ' streaming' : ''}`} key={i}>
                {m.reasoning ? (
                  <details class="reasoning">
                    <summary>{live && !m.content ? 'Thinking…' : 'Thoughts'}</summary>
                    <div class="reasoning-text">{m.reasoning}</div>
                  </details>
                ) : null}
                <Markdown text={m.content} />
                {m.stopped ? <div class="note stopped">Stopped.</div> : null}
                {m.error ? <div class="note error">{m.error}</div> : null}
                {m.stats && (m.stats.usage || m.stats.timings) ? <div class="stats">{statsLine(m.stats)}</div> : null}
                {last && !streaming ? (
                  <button type="button" class="link regenerate" onClick={regenerate}>
                    Regenerate
                  </button>
                ) : null}
              </div>
            );
          })}
        </div>
        <form
          class="composer"
          onSubmit={(e) => {
            e.preventDefault();
            send();
          }}
        >
          <textarea
            ref={inputRef}
            class="prompt"
            rows={2}
            placeholder="Message"
            value={input}
            onInput={(e) => setInput(e.currentTarget.value)}
            onKeyDown={onComposerKey}
          />
          {streaming ? (
            <button type="button" class="stop" onClick={stop}>
              Stop
            </button>
          ) : (
            <button type="submit" class="send" disabled={!input.trim()}>
              Send
            </button>
          )}
        </form>
      </main>
      {showSettings ? (
        <aside class="settings" aria-label="Settings">
          <h2>Settings</h2>
          <p class="hint">Empty fields use the server's defaults.</p>
          <label>
            System prompt
            <textarea name="system" rows={4} value={settings.system} onInput={setting('system')} />
          </label>
          <label>
            Temperature
            <input name="temperature" type="number" min="0" max="2" step="0.05" placeholder="1" value={settings.temperature} onInput={setting('temperature')} />
          </label>
          <label>
            Top-p
            <input name="top_p" type="number" min="0" max="1" step="0.01" placeholder="1" value={settings.top_p} onInput={setting('top_p')} />
          </label>
          <label>
            Top-k
            <input name="top_k" type="number" min="0" step="1" placeholder="off" value={settings.top_k} onInput={setting('top_k')} />
          </label>
          <label>
            Max tokens
            <input name="max_tokens" type="number" min="1" step="1" placeholder="server default" value={settings.max_tokens} onInput={setting('max_tokens')} />
          </label>
          <label>
            Seed
            <input name="seed" type="number" min="0" step="1" placeholder="random" value={settings.seed} onInput={setting('seed')} />
          </label>
          <label class="check">
            <input name="thinking" type="checkbox" checked={settings.thinking} onChange={(e) => setSettings({ ...settings, thinking: e.currentTarget.checked })} />
            Thinking
          </label>
          <div class="settings-actions">
            <button type="button" onClick={() => setSettings(DEFAULT_SETTINGS)}>
              Reset
            </button>
            <button type="button" onClick={() => setShowSettings(false)}>
              Close
            </button>
          </div>
        </aside>
      ) : null}
      {needKey ? (
        <div class="dialog-backdrop">
          <form class="dialog key-dialog" onSubmit={submitKey}>
            <h2>API key</h2>
            <p>This server wants an API key. The page keeps it in this browser.</p>
            <input name="key" type="password" autoComplete="off" autoFocus placeholder="API key" />
            {keyError ? <p class="error key-error">{keyError}</p> : null}
            <button type="submit">Connect</button>
          </form>
        </div>
      ) : null}
    </div>
  );
}
