// The Nacre cluster page: it asks the MGS for /api/cluster every second
// and redraws from the answer. The MGS keeps the history, so a page
// opened now draws the last two minutes at once. No framework: the DOM is
// built with createElement and textContent (never HTML from the server),
// and the sparklines are SVG polylines.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const $ = (id) => document.getElementById(id);

// el makes an element with a class and children (strings become text).
function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + ' ' + units[i];
}

// count shortens a large count: 42127660 is 42.1 M.
function count(n) {
  if (n < 10000) return String(n);
  const units = ['k', 'M', 'G', 'T'];
  let i = -1;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return n.toFixed(1) + ' ' + units[i];
}

function num(n) {
  return n >= 100 ? n.toFixed(0) : n.toFixed(1);
}

// spark draws values (oldest first) as a line over its area, scaled to
// the largest value, so a quiet cluster is a flat line at the bottom.
function spark(values, w, h) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('width', w);
  svg.setAttribute('height', h);
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  if (values.length < 2) return svg;
  const top = Math.max(...values, 1e-9);
  const pts = values.map((v, i) => {
    const x = (i / (values.length - 1)) * w;
    const y = h - 1 - (v / top) * (h - 2);
    return x.toFixed(1) + ',' + y.toFixed(1);
  });
  const area = document.createElementNS(SVG, 'polygon');
  area.setAttribute('points', `0,${h} ${pts.join(' ')} ${w},${h}`);
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute('points', pts.join(' '));
  svg.append(area, line);
  return svg;
}

function card(id, value, history, pick) {
  $('rate-' + id).textContent = value;
  $('spark-' + id).replaceChildren(spark(history.map(pick), 180, 36));
}

function stateBadge(s) {
  const cls = s === 'up' ? 'up' : s === 'down' ? 'down' : 'maybe';
  return el('span', 'state ' + cls, s);
}

function usage(used, total) {
  if (!total) return '–';
  const bar = el('span', 'bar');
  const fill = el('span', used / total > 0.9 ? 'full' : '');
  fill.style.width = Math.min(100, (100 * used) / total).toFixed(1) + '%';
  bar.append(fill);
  return el('span', '', bar, bytes(used) + ' / ' + bytes(total));
}

function row(cells) {
  const tr = el('tr', '');
  for (const c of cells) {
    const td = c instanceof Node && c.tagName === 'TD' ? c : el('td', '', c);
    tr.append(td);
  }
  return tr;
}

const numCell = (v) => el('td', 'n', v);

function renderTargets(d) {
  const body = $('targets').tBodies[0];
  body.replaceChildren(...d.targets.map((t) => {
    const r = t.rates;
    const tr = row([
      el('strong', '', t.name),
      stateBadge(t.state),
      el('span', 'role ' + (t.role || ''), t.role || '–'),
      t.addr,
      usage(t.bytes_used, t.bytes_total),
      t.inodes_total ? `${count(t.inodes_used)} / ${count(t.inodes_total)}` : '–',
      numCell(r ? (100 * r.cpu_cores).toFixed(0) + ' %' : '–'),
      numCell(r && t.kind !== 'mgs' ? num(r.ops_per_sec) : '–'),
      el('td', '', t.kind === 'mgs' ? '' : spark(t.ops_history || [], 100, 20)),
      r && r.top_ops ? r.top_ops.map((o) => `${o.op} ${num(o.per_sec)}`).join(', ') : (t.scrape_error ? 'metrics do not answer' : ''),
      t.kind === 'ost' && r ? `${bytes(r.read_bytes_per_sec)} / ${bytes(r.write_bytes_per_sec)}` : '',
    ]);
    tr.dataset.target = t.name;
    return tr;
  }));
}

function renderLfsck(d) {
  const checks = d.lfsck || [];
  $('lfsck').hidden = checks.length === 0;
  $('lfsck-none').hidden = checks.length > 0;
  const phase = (c) => c.running ? (c.phase === 2 ? 'running: cross-checks' : 'running: scan') : 'idle';
  $('lfsck').tBodies[0].replaceChildren(...checks.map((c) => row([
    c.target, c.component, phase(c), numCell(c.checked), numCell(num(c.checked_per_sec)),
    numCell(c.position), numCell(c.inconsistent), numCell(c.repaired), numCell(c.failed),
  ])));
}

function renderEvents(d) {
  const evs = (d.events || []).slice(0, 30);
  $('events-none').hidden = evs.length > 0;
  $('events').replaceChildren(...evs.map((e) => {
    const t = el('time', '', new Date(e.at).toLocaleTimeString());
    return el('li', e.level, t, e.message);
  }));
}

function render(d) {
  $('fsname').textContent = d.fsname;
  $('clock').textContent = new Date(d.at).toLocaleTimeString();
  const problems = [];
  if (d.error) problems.push('The MGS does not answer: ' + d.error + ' (showing its last answer)');
  for (const g of d.no_leader || []) problems.push(g + ' has no leader: it answers nothing until a majority of its replicas elects one');
  const down = d.targets.filter((t) => t.state === 'down').map((t) => t.name);
  if (down.length) problems.push('Down: ' + down.join(', '));
  $('alert').hidden = problems.length === 0;
  $('alert').replaceChildren(...problems.map((p) => el('div', '', p)));

  const t = d.totals;
  const h = d.history || [];
  card('mds-ops', t ? num(t.mds_ops_per_sec) : '–', h, (p) => p.mds_ops_per_sec);
  card('ost-ops', t ? num(t.ost_ops_per_sec) : '–', h, (p) => p.ost_ops_per_sec);
  card('read', t ? bytes(t.read_bytes_per_sec) : '–', h, (p) => p.read_bytes_per_sec);
  card('write', t ? bytes(t.write_bytes_per_sec) : '–', h, (p) => p.write_bytes_per_sec);
  card('cpu', t ? (100 * t.cpu_cores).toFixed(0) + ' %' : '–', h, (p) => p.cpu_cores);
  renderTargets(d);
  renderLfsck(d);
  renderEvents(d);
}

async function poll() {
  try {
    const r = await fetch('/api/cluster', { cache: 'no-store' });
    if (!r.ok) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
    render(await r.json());
    $('conn').textContent = 'live, every second';
    $('conn').className = 'conn';
  } catch (e) {
    $('conn').textContent = 'no answer from the MGS: ' + e.message;
    $('conn').className = 'conn bad';
  } finally {
    setTimeout(poll, 1000);
  }
}

poll();
