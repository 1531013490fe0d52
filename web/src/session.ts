// The signed-in token lives in sessionStorage: it survives a reload of the
// tab but not the tab itself, and is never written to a URL or a cookie.

const kKey = "kiln.token";

export function loadToken(): string | null {
  return sessionStorage.getItem(kKey);
}

export function saveToken(token: string): void {
  sessionStorage.setItem(kKey, token);
}

export function clearToken(): void {
  sessionStorage.removeItem(kKey);
}
