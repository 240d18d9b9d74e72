// @ts-check
// Charts of an address's stats (volume by status class, latency, time with
// no listener), drawn with the vendored uPlot (assets/vendor/uplot, loaded
// by index.html as the global uPlot). The relay computes every figure
// (Endpoint.stats, Inspector.stats); this file only draws them. Each chart
// has the same numbers as a table for screen readers, in a details element.
import { h, replace } from './dom.js';
import { request, describeError, GraphQLError } from './graphql.js';
import { ENDPOINT_STATS, ENDPOINTS_STATS, INSPECTOR_STATS } from './api.js';
import { notice } from './ui.js';

/**
 * The status classes stacked in the volume chart, bottom first.
 * @type {Array<{ key: 'status2xx' | 'status3xx' | 'status4xx' | 'status5xx' | 'pending', label: string, status: string, color: string }>}
 */
const CLASSES = [
  { key: 'status2xx', label: '2xx', status: '2xx', color: '#2f9e5b' },
  { key: 'status3xx', label: '3xx', status: '3xx', color: '#3b7ddd' },
  { key: 'status4xx', label: '4xx', status: '4xx', color: '#d08c00' },
  { key: 'status5xx', label: '5xx', status: '5xx', color: '#d64545' },
  { key: 'pending', label: 'No answer yet', status: 'none', color: '#8a8f9c' },
];

/** @type {Array<[GQL.StatsRange, string]>} */
const RANGES = [['HOUR', 'Hour'], ['DAY', 'Day'], ['WEEK', 'Week']];

/** REFRESH_MS is how long new deliveries wait before the stats are read again: one read for a burst. */
const REFRESH_MS = 1500;

/**
 * cssVar reads a colour of the page's theme (light or dark).
 * @param {string} name
 * @param {string} fallback
 */
function cssVar(name, fallback) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

function uplot() {
  // The vendored uPlot, loaded by index.html as a global.
  return globalThis.uPlot;
}

/**
 * @param {string} iso
 * @param {number} bucketSeconds
 */
function timeLabel(iso, bucketSeconds) {
  const d = new Date(iso);
  const opts = bucketSeconds >= 3600
    ? { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' }
    : { hour: '2-digit', minute: '2-digit' };
  return d.toLocaleString(undefined, /** @type {Intl.DateTimeFormatOptions} */ (opts));
}

/**
 * volumeData is uPlot's data for the stacked bars: x in seconds, then one
 * series per class holding its top (its count plus those below it), drawn
 * top class first so each lower one paints over it.
 * @param {GQL.Stats} stats
 */
function volumeData(stats) {
  const xs = stats.buckets.map((b) => Date.parse(b.start) / 1000);
  const tops = [];
  let below = stats.buckets.map(() => 0);
  for (const c of CLASSES) {
    below = stats.buckets.map((b, i) => below[i] + b[c.key]);
    tops.push(below);
  }
  return [xs, ...tops.reverse()];
}

/**
 * statsPanel shows an address's charts with a range picker; onPick(bucket,
 * status, stats) is called when a bar is clicked (status: '2xx'…'5xx' or
 * 'none'). refresh() reads the stats again, at most once per REFRESH_MS.
 * @param {{ kind: 'endpoint' | 'inspector', id: string, onPick?: (bucket: GQL.StatsBucket, status: string, stats: GQL.Stats) => void }} options
 */
export function statsPanel({ kind, id, onPick }) {
  const isEndpoint = kind === 'endpoint';
  /** @type {GQL.StatsRange} */
  let range = 'HOUR';
  /** @type {GQL.Stats} set by load before render reads it */
  let stats;
  /** @type {UPlot[]} */
  let charts = [];
  /** @type {ReturnType<typeof setTimeout> | 0} */
  let timer = 0;
  let seq = 0;
  let disposed = false;
  const summary = h('p', { class: 'stats-summary', 'data-testid': 'stats-summary', 'aria-live': 'polite' });
  const volumeBox = h('div', { class: 'chart chart-volume', 'data-testid': 'chart-volume' });
  const latencyBox = h('div', { class: 'chart chart-latency', 'data-testid': 'chart-latency' });
  const tableBox = h('div', {});
  const errorBox = h('div', {});
  const legend = h('ul', { class: 'chart-legend', 'aria-hidden': 'true' },
    CLASSES.map((c) => h('li', {}, h('span', { class: `swatch swatch-${c.status}` }), c.label)));
  const picker = h('div', { class: 'range-picker', role: 'group', 'aria-label': 'Chart range' },
    RANGES.map(([value, label]) => h('button', {
      type: 'button', class: 'btn btn-small', 'data-range': value, 'aria-pressed': String(value === range),
      onclick: () => { range = value; picker.querySelectorAll('button').forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.range === range))); load(); },
    }, label)));
  const el = h('section', { class: 'card stats', 'aria-labelledby': 'stats-title', 'data-testid': 'stats' },
    h('div', { class: 'list-head' }, h('h2', { id: 'stats-title' }, 'At a glance'), picker),
    summary, errorBox,
    h('div', { class: 'chart-row' },
      h('figure', { class: 'chart-figure' }, h('figcaption', { class: 'muted small' }, 'Deliveries by status (click a bar to list them)'), volumeBox, legend),
      h('figure', { class: 'chart-figure' }, h('figcaption', { class: 'muted small' }, 'Local answer time, ms (p50, p95)'), latencyBox)),
    tableBox);

  const resize = () => charts.forEach((c) => c.setSize(size(c.root.parentElement)));
  window.addEventListener('resize', resize);

  /** @param {Element | null} box */
  function size(box) {
    return { width: Math.max(200, (box && box.clientWidth) || 400), height: 160 };
  }

  async function load() {
    const mine = ++seq;
    try {
      const data = await request(isEndpoint ? ENDPOINT_STATS : INSPECTOR_STATS, { id, range });
      if (disposed || mine !== seq) return;
      const owner = isEndpoint ? data.endpoint : data.inspector;
      if (!owner) return;
      stats = owner.stats;
      replace(errorBox);
      render();
    } catch (err) {
      if (!disposed && mine === seq) replace(errorBox, notice('error', `Stats unavailable: ${describeError(err)}`));
    }
  }

  function render() {
    const t = stats.totals;
    const parts = [`${t.deliveries} deliveries`, `${t.status2xx} 2xx`, `${t.status3xx} 3xx`, `${t.status4xx} 4xx`, `${t.status5xx} 5xx`,
      `${t.pending} without answer`, `${t.filtered} filtered`, `${t.refused} refused`];
    if (t.p50Ms != null) parts.push(`p50 ≤ ${t.p50Ms} ms`, `p95 ≤ ${t.p95Ms} ms`);
    if (t.offlineSeconds != null) parts.push(`no listener ${formatSeconds(t.offlineSeconds)}`);
    summary.textContent = parts.join(' · ');
    renderTable();
    for (const c of charts) c.destroy();
    charts = [];
    const U = uplot();
    if (!U) {
      replace(volumeBox, h('p', { class: 'muted small' }, 'Charts need the uPlot script.'));
      return;
    }
    charts.push(volumeChart(U), latencyChart(U));
  }

  /**
   * @param {UPlotConstructor} U
   * @returns {UPlotAxis[]}
   */
  function axes(U) {
    const stroke = cssVar('--muted', '#5b6072');
    const grid = { stroke: cssVar('--border', '#dfe1ea'), width: 1 };
    return [
      { stroke, grid, ticks: grid },
      { stroke, grid, ticks: grid, size: 40 },
    ];
  }

  /** @param {UPlotConstructor} U */
  function volumeChart(U) {
    const data = volumeData(stats);
    const bars = U.paths.bars({ size: [0.8, 40] });
    const reversed = [...CLASSES].reverse();
    const u = new U({
      ...size(volumeBox),
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      axes: axes(U),
      series: [{}, ...reversed.map((c) => ({ label: c.label, fill: c.color, stroke: c.color, width: 0, paths: bars, points: { show: false } }))],
    }, data, volumeBox);
    u.over.addEventListener('click', () => {
      const i = u.cursor.idx;
      const top = u.cursor.top;
      if (i == null || top == null || !onPick) return;
      const v = u.posToVal(top, 'y');
      const b = stats.buckets[i];
      // The class whose band holds the clicked height, bottom up.
      let below = 0;
      for (const c of CLASSES) {
        const n = b[c.key];
        if (n && v <= below + n) {
          onPick(b, c.status, stats);
          return;
        }
        below += n;
      }
    });
    replace(volumeBox);
    volumeBox.append(u.root);
    return u;
  }

  /** @param {UPlotConstructor} U */
  function latencyChart(U) {
    const xs = stats.buckets.map((b) => Date.parse(b.start) / 1000);
    const u = new U({
      ...size(latencyBox),
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(10, max)] } },
      axes: axes(U),
      series: [{},
        { label: 'p50 ms', stroke: '#3b7ddd', width: 2, spanGaps: false, points: { show: true, size: 6, fill: '#3b7ddd' } },
        { label: 'p95 ms', stroke: '#d64545', width: 2, dash: [4, 3], spanGaps: false, points: { show: true, size: 6, fill: '#d64545' } }],
    }, [xs, stats.buckets.map((b) => b.p50Ms), stats.buckets.map((b) => b.p95Ms)], latencyBox);
    replace(latencyBox);
    latencyBox.append(u.root);
    return u;
  }

  // renderTable lists every bucket that holds something, with the totals:
  // what the charts show, for screen readers and to copy from.
  function renderTable() {
    const cols = ['Deliveries', ...CLASSES.map((c) => c.label), 'Filtered', 'Refused', 'p50 ms', 'p95 ms'];
    if (isEndpoint) cols.push('No listener');
    const cells = (/** @type {GQL.StatsBucket} */ b) => [b.deliveries, ...CLASSES.map((c) => b[c.key]), b.filtered, b.refused, b.p50Ms ?? '—', b.p95Ms ?? '—',
      ...(isEndpoint ? [formatSeconds(b.offlineSeconds || 0)] : [])];
    const busy = stats.buckets.filter((b) => b.deliveries || b.refused || b.answers);
    replace(tableBox, h('details', { class: 'stats-table' },
      h('summary', {}, 'Chart data as a table'),
      h('div', { class: 'table-scroll' }, h('table', { class: 'table', 'data-testid': 'stats-table', 'data-from': stats.from, 'data-bucket-seconds': stats.bucketSeconds },
        h('caption', {}, `Deliveries per ${formatSeconds(stats.bucketSeconds)} from ${timeLabel(stats.from, stats.bucketSeconds)}; buckets with nothing are left out.`),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'From'), cols.map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, busy.map((b) => h('tr', { 'data-start': b.start },
          h('th', { scope: 'row' }, h('time', { datetime: b.start }, timeLabel(b.start, stats.bucketSeconds))),
          cells(b).map((v) => h('td', {}, String(v)))))),
        h('tfoot', {}, h('tr', { 'data-testid': 'stats-totals' }, h('th', { scope: 'row' }, 'Total'),
          cells(stats.totals).map((v) => h('td', {}, String(v)))))))));
  }

  load();
  return {
    el,
    /** refresh reads the stats again once new deliveries settle. */
    refresh() {
      clearTimeout(timer);
      timer = setTimeout(load, REFRESH_MS);
    },
    dispose() {
      disposed = true;
      clearTimeout(timer);
      window.removeEventListener('resize', resize);
      for (const c of charts) c.destroy();
    },
  };
}

/**
 * SPARKLINES_PAGE is how many Endpoints' sparklines one request reads. A
 * row's stats weigh 850 points whatever they select, 1 096 with what a
 * sparkline selects (60 buckets of four fields): nine rows cost 9 865, the
 * most under the relay's default --max-query-cost of 10 000. A relay with
 * a lower budget refuses such a page QUERY_TOO_COMPLEX: the console then
 * asks for pages of half as many rows, down to one (sparklines.readRun).
 */
export const SPARKLINES_PAGE = 9;

/**
 * sparklines makes the small charts beside the home page's Endpoints:
 * each one's last hour of deliveries per minute, failures (4xx, 5xx) in
 * red, with the figures as a visually hidden table. It reads the stats of
 * the rows on screen only, once each, SPARKLINES_PAGE Endpoints a request
 * (a page of the endpoints list with first and after), one request at a
 * time, so a visit costs a few requests however many Endpoints the
 * account holds, not one each.
 * box(i) is the chart of list[i]; start() begins watching the boxes once
 * they are in the page.
 * @param {GQL.Endpoint[]} list the Endpoints, in the order the endpoints list gives them
 */
export function sparklines(list) {
  const boxes = list.map((_, i) => h('div', { class: 'sparkline', 'data-testid': 'sparkline', 'data-index': String(i) }));
  /** @type {Set<number>} rows shown whose stats are still to be asked for */
  const due = new Set();
  let disposed = false;
  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      observer.unobserve(entry.target);
      due.add(Number(/** @type {HTMLElement} */ (entry.target).dataset.index));
    }
    read();
  }, { rootMargin: '200px 0px' });

  // size is the rows one request asks for: SPARKLINES_PAGE, less once a
  // relay's lower budget refused a page.
  let size = SPARKLINES_PAGE;
  // queue holds the reads, one request at a time.
  let queue = Promise.resolve();

  // read asks for the due rows' stats, each run of adjacent rows on its own.
  function read() {
    const rows = [...due].sort((a, b) => a - b);
    due.clear();
    /** @type {number[]} */
    let run = [];
    for (const i of rows) {
      if (run.length && i !== run[run.length - 1] + 1) {
        readRun(run);
        run = [];
      }
      run.push(i);
    }
    if (run.length) readRun(run);
  }

  /**
   * readRun queues the read of adjacent rows, in pages of size. A page the
   * relay's budget refuses (QUERY_TOO_COMPLEX) is asked again, and every
   * page after it, with half as many rows; another refusal leaves the
   * run's other sparklines empty: they hide nothing the Endpoint's page
   * does not show.
   * @param {number[]} rows
   */
  function readRun(rows) {
    queue = queue.then(async () => {
      for (let i = 0; i < rows.length && !disposed;) {
        const n = Math.min(size, rows.length - i);
        try {
          await readPage(rows.slice(i, i + n));
          i += n;
        } catch (err) {
          if (!(err instanceof GraphQLError && err.code === 'QUERY_TOO_COMPLEX' && n > 1)) return;
          size = Math.ceil(n / 2);
        }
      }
    });
  }

  /**
   * readPage reads the stats of adjacent rows and draws them. A relay that
   * answers fewer rows than asked is asked again after the last it gave.
   * @param {number[]} rows
   */
  async function readPage(rows) {
    let left = rows;
    while (left.length && !disposed) {
      const after = left[0] > 0 ? list[left[0] - 1].id : undefined;
      const page = (await request(ENDPOINTS_STATS, { first: left.length, after })).endpoints;
      if (disposed) return;
      for (const e of page) {
        const i = left.find((j) => list[j].id === e.id);
        if (i !== undefined) drawSparkline(boxes[i], list[i].name, e.stats);
      }
      // A full page, or an empty one: the list changed since it was read.
      if (!page.length || page.length >= left.length) return;
      const last = left.findIndex((j) => list[j].id === page[page.length - 1].id);
      if (last < 0) return;
      left = left.slice(last + 1);
    }
  }

  return {
    /** @param {number} i */
    box: (i) => boxes[i],
    start() {
      for (const b of boxes) observer.observe(b);
    },
    dispose() {
      disposed = true;
      observer.disconnect();
    },
  };
}

/**
 * drawSparkline draws an Endpoint's last hour into box: deliveries per
 * minute, failures in red, and the figures as a visually hidden table.
 * @param {HTMLElement} box
 * @param {string} name
 * @param {GQL.Stats} stats
 */
function drawSparkline(box, name, stats) {
  const t = stats.totals;
  const table = h('table', { class: 'sr-only' },
    h('caption', {}, `${name}, last hour`),
    h('tbody', {},
      h('tr', {}, h('th', { scope: 'row' }, 'Deliveries'), h('td', {}, String(t.deliveries))),
      h('tr', {}, h('th', { scope: 'row' }, 'Failed (4xx, 5xx)'), h('td', {}, String(t.status4xx + t.status5xx)))));
  const U = uplot();
  if (!U) {
    replace(box, table);
    return;
  }
  const xs = stats.buckets.map((b) => Date.parse(b.start) / 1000);
  const bars = U.paths.bars({ size: [0.9, 6] });
  const u = new U({
    width: 120, height: 28, legend: { show: false }, cursor: { show: false },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    axes: [{ show: false }, { show: false }],
    series: [{},
      { fill: '#2f9e5b', stroke: '#2f9e5b', width: 0, paths: bars, points: { show: false } },
      { fill: '#d64545', stroke: '#d64545', width: 0, paths: bars, points: { show: false } }],
  }, [xs, stats.buckets.map((b) => b.deliveries), stats.buckets.map((b) => b.status4xx + b.status5xx)], box);
  u.root.setAttribute('aria-hidden', 'true');
  box.title = `${t.deliveries} deliveries, ${t.status4xx + t.status5xx} failed in the last hour`;
  box.append(table);
}

/** @param {number} s */
function formatSeconds(s) {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? ` ${s % 60}s` : ''}`;
  const hours = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${hours}h${m ? ` ${m}m` : ''}`;
}
