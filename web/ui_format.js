/* Numbers, times, digests and traffic splits as short text. */

/* A number as given: the shortest decimal that reads back as the same double (what
 * JavaScript's String() writes, and what the server sends), so 0.942 stays 0.942. */
export function fmtNum(x) {
  if (typeof x !== 'number' || !isFinite(x))
    return x === null || x === undefined ? '—' : String(x);
  return String(x);
}

/* A number the UI computed (a ratio, GiB from bytes): four significant digits. */
export function fmtApprox(x) {
  if (typeof x !== 'number' || !isFinite(x))
    return fmtNum(x);
  if (Number.isInteger(x))
    return String(x);
  if (Math.abs(x) >= 1000)
    return String(parseFloat(x.toFixed(1)));
  return String(parseFloat(x.toPrecision(4)));
}

/* A recorded value (a metric, a threshold, a gate's observation): the shortest text that
 * reads back as the same number, as the API sends it (0.94212, never rounded to 0.9421),
 * so two different values never look equal. */
export function fmtExact(x) {
  if (typeof x !== 'number' || !isFinite(x))
    return fmtNum(x);
  return String(x);
}

/* Digits after the point in the shortest form of x (1e-7 counts as 7). */
function decimals(x) {
  const m = /^-?\d*(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(x));
  if (!m)
    return 0;
  return Math.max(0, (m[1] ? m[1].length : 0) - (m[2] ? Number(m[2]) : 0));
}

/* b - a, rounded to the decimals a and b were given with: 0.945 - 0.931 is 0.014, not
 * 0.014000000000000012. */
export function diff(a, b) {
  const d = Math.min(20, Math.max(decimals(a), decimals(b)));
  return parseFloat((b - a).toFixed(d));
}

export function fmtDelta(x) {
  if (x === 0)
    return '0';
  return (x > 0 ? '+' : '−') + fmtApprox(Math.abs(x));
}

export function ago(iso) {
  if (!iso)
    return '—';
  const t = Date.parse(iso);
  if (isNaN(t))
    return String(iso);
  let sec = Math.round((Date.now() - t) / 1000);
  const future = sec < 0;
  sec = Math.abs(sec);
  let txt;
  if (sec < 5)
    return future ? 'in a moment' : 'just now';
  if (sec < 60)
    txt = sec + ' s';
  else if (sec < 3600)
    txt = Math.floor(sec / 60) + ' min';
  else if (sec < 86400)
    txt = Math.floor(sec / 3600) + ' h';
  else
    txt = Math.floor(sec / 86400) + ' d';
  return future ? 'in ' + txt : txt + ' ago';
}

export function shortDigest(d) {
  if (typeof d !== 'string')
    return '—';
  const m = /^sha256:([0-9a-f]{12})[0-9a-f]*$/.exec(d);
  return m ? 'sha256:' + m[1] + '…' : d;
}

export function routesText(routes) {
  if (!routes || routes.length === 0)
    return 'no traffic';
  return routes.map((r) => 'v' + r.version + ' ' + r.weight + '%').join(' · ');
}

/* Bytes as B, KiB, MiB, GiB or TiB with up to three significant digits. */
export function fmtBytes(n) {
  if (typeof n !== 'number' || !isFinite(n) || n < 0)
    return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i === 0 ? String(n) : String(parseFloat(n.toPrecision(3)))) + ' ' + units[i];
}
