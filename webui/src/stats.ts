// The figures under an answer, from the server's `usage` and `timings`.
import type { Stats } from './api';

const rate = (perSecond: number) => (perSecond >= 100 ? perSecond.toFixed(0) : perSecond.toFixed(1));

export function statsLine(s: Stats): string {
  const parts: string[] = [];
  if (s.usage) {
    const cached = s.usage.prompt_tokens_details?.cached_tokens ?? 0;
    parts.push(`prompt ${s.usage.prompt_tokens} tokens (${cached} cached)`);
  }
  if (s.timings) {
    if (s.timings.prompt_n > 0) parts.push(`prompt ${rate(s.timings.prompt_per_second)} tok/s`);
    parts.push(`${s.timings.predicted_n} tokens at ${rate(s.timings.predicted_per_second)} tok/s`);
  }
  if (s.finishReason === 'length') parts.push('stopped at max tokens');
  return parts.join(' · ');
}
