#pragma once
// The chat page served at "/": one static HTML file, no build step. It streams
// answers token by token over SSE, keeps its session id, and shows tokens/s
// and the session's cache occupancy (sinks | window | evicted so far).
namespace ss {
inline constexpr const char* kWebPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sinkstream chat</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;max-width:820px;margin:24px auto;padding:0 12px;color:#222}
#log{border:1px solid #ccc;border-radius:6px;padding:10px;height:55vh;overflow-y:auto;white-space:pre-wrap;background:#fafafa}
.user{color:#0b57d0;margin-top:8px}.assistant{color:#222;margin-top:4px}
form{display:flex;gap:8px;margin-top:10px}#msg{flex:1;padding:8px;font-size:15px}button{padding:8px 14px}
#stats{font-size:13px;color:#555;margin-top:8px}
#bar{display:flex;height:16px;border:1px solid #999;margin-top:6px;border-radius:3px;overflow:hidden}
#bar div{height:100%}#sinks{background:#d62728}#window{background:#1f77b4}#free{background:#eee;flex:1}
#legend{font-size:12px;color:#555}
</style></head><body>
<h2>sinkstream chat</h2>
<div id="log"></div>
<form id="f"><input id="msg" autocomplete="off" placeholder="Type a message"><button id="send">Send</button></form>
<div id="stats">session <span id="sid"></span> · <span id="tps">–</span> tok/s · <span id="seen">0</span> tokens seen</div>
<div id="bar"><div id="sinks"></div><div id="window"></div><div id="free"></div></div>
<div id="legend">cache: <b style="color:#d62728">sinks</b> <span id="ns">0</span> | <b style="color:#1f77b4">window</b> <span id="nw">0</span>/<span id="cw">0</span> | evicted so far <span id="ev">0</span></div>
<script>
const sid = sessionStorage.getItem('sinkstream-session') || ('web-' + Math.random().toString(36).slice(2, 10));
sessionStorage.setItem('sinkstream-session', sid);
document.getElementById('sid').textContent = sid;
const log = document.getElementById('log');
function add(cls, text) { const d = document.createElement('div'); d.className = cls; d.textContent = text; log.appendChild(d); log.scrollTop = log.scrollHeight; return d; }
async function refresh() {
  const r = await fetch('/v1/sessions/' + sid); if (!r.ok) return;
  const s = await r.json();
  const cap = Math.max(1, s.cache.capacity_sinks + s.cache.capacity_window);
  document.getElementById('sinks').style.width = (100 * s.cache.sinks / cap) + '%';
  document.getElementById('window').style.width = (100 * s.cache.window / cap) + '%';
  document.getElementById('ns').textContent = s.cache.sinks; document.getElementById('nw').textContent = s.cache.window;
  document.getElementById('cw').textContent = s.cache.capacity_window; document.getElementById('ev').textContent = s.cache.evicted;
  document.getElementById('seen').textContent = s.tokens_seen;
}
document.getElementById('f').addEventListener('submit', async (e) => {
  e.preventDefault();
  const input = document.getElementById('msg'); const text = input.value.trim(); if (!text) return;
  input.value = ''; add('user', 'you: ' + text); const out = add('assistant', '');
  const t0 = performance.now(); let n = 0; let lastRefresh = t0;
  const r = await fetch('/v1/chat/completions', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Session-Id': sid},
    body: JSON.stringify({messages: [{role: 'user', content: text}], stream: true, max_tokens: 200})});
  const reader = r.body.getReader(); const dec = new TextDecoder(); let buf = '';
  for (;;) {
    const {value, done} = await reader.read(); if (done) break;
    buf += dec.decode(value, {stream: true});
    let i; while ((i = buf.indexOf('\n\n')) >= 0) {
      const line = buf.slice(0, i); buf = buf.slice(i + 2);
      if (!line.startsWith('data: ')) continue; const data = line.slice(6); if (data === '[DONE]') continue;
      const j = JSON.parse(data); const c = j.choices && j.choices[0] && j.choices[0].delta && j.choices[0].delta.content;
      if (c) { out.textContent += c; n++; log.scrollTop = log.scrollHeight; }
      if (j.usage) n = j.usage.completion_tokens;
      document.getElementById('tps').textContent = (n / ((performance.now() - t0) / 1000)).toFixed(1);
      if (performance.now() - lastRefresh > 500) { lastRefresh = performance.now(); refresh(); }  // live cache bar
    }
  }
  out.dataset.done = '1'; refresh();
});
refresh();
</script></body></html>
)HTML";
}  // namespace ss
