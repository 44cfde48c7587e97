// Sanitized Markdown in a container that adds a Copy button to each code block.
import { useLayoutEffect, useRef } from 'preact/hooks';
import { renderMarkdown } from './markdown';

async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  // Plain http on another host is no secure context: fall back to a selection.
  const area = document.createElement('textarea');
  area.value = text;
  document.body.appendChild(area);
  area.select();
  document.execCommand('copy');
  area.remove();
}

export function Markdown({ text }: { text: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    const root = ref.current;
    if (!root) return;
    root.innerHTML = renderMarkdown(text);
    for (const pre of root.querySelectorAll('pre')) {
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'copy';
      button.textContent = 'Copy';
      button.addEventListener('click', () => {
        copyText(pre.querySelector('code')?.textContent ?? '').then(
          () => (button.textContent = 'Copied'),
          () => (button.textContent = 'Copy failed'),
        );
      });
      pre.appendChild(button);
    }
  }, [text]);
  return <div class="markdown" ref={ref} />;
}
