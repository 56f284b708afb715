/**
 * The ports fetch will not connect to (the WHATWG Fetch standard's "bad port" list, which
 * Node's fetch follows). svc's own clients — the CLI, the worker and the gateway's link to
 * the kernel — all speak fetch, so a listener on one of these ports could never be reached
 * by them: svcd refuses such an address at startup, and the clients name the cause.
 */
const FETCH_BLOCKED_PORTS: ReadonlySet<number> = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137,
  139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723,
  2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** Whether fetch refuses to connect to `port`. */
export function isFetchBlockedPort(port: number): boolean {
  return FETCH_BLOCKED_PORTS.has(port);
}

/** Whether fetch refuses the port of `url` (an explicit one; a URL that does not parse is not this check's to refuse). */
export function urlHasFetchBlockedPort(url: string): boolean {
  return URL.canParse(url) && isFetchBlockedPort(Number(new URL(url).port));
}

/** How a client says it could not connect because of the list (fetch's own words are "bad port"). */
export function fetchBlockedPortHint(url: string): string {
  let port = '';
  try {
    port = new URL(url).port;
  } catch {
    /* the caller's URL was already used, so it parses; keep the hint general if not */
  }
  return `port ${port || 'of ' + url} is one that fetch refuses to connect to (a "bad port" of the Fetch standard); use another port`;
}
