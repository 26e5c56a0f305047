/* Numbers, times, digests and traffic splits as short text. */

export function fmtNum(x) {
  if (typeof x !== 'number' || !isFinite(x))
    return x === null || x === undefined ? '—' : String(x);
  if (Number.isInteger(x))
    return String(x);
  const a = Math.abs(x);
  if (a >= 1000)
    return x.toFixed(1);
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

export function fmtDelta(x) {
  if (x === 0)
    return '0';
  return (x > 0 ? '+' : '−') + fmtNum(Math.abs(x));
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
