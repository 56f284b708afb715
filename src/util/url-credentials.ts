/**
 * URLs with a user name or password (`http://user:pw@host`): fetch refuses every request to
 * one, and whatever quotes one quotes the password. Found up front, and taken out of text.
 */

/**
 * Whether `url` carries a user name or password (`http://user:pw@host`). fetch refuses every
 * request to such a URL, and anything that printed it would print the password: svc refuses
 * it up front instead (svc's addresses, svcd's SVC_GATEWAY_URL, the worker's provider). A string that does not parse is judged by its shape.
 */
export function urlHasCredentials(url: string): boolean {
  if (URL.canParse(url)) {
    const u = new URL(url);
    return u.username !== '' || u.password !== '';
  }
  return /^[a-z][a-z0-9+.-]*:\/\/[^/\\?#\s]*@/i.test(url.trim());
}

/**
 * `text` with the user name and password of every URL in it taken out (`http://u:pw@host/x`
 * becomes `http://host/x`): for log lines and error messages, which may quote a URL (fetch's
 * own messages do).
 */
export function withoutCredentials(text: string): string {
  // Greedy up to the last `@` of the authority: a password may hold an `@` of its own.
  return text.replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^/\\?#\s]*@/gi, '$1');
}

