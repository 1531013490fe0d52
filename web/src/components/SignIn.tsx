import { useState } from "preact/hooks";

export function SignIn(props: { onSignIn: (token: string) => Promise<string | null> }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <main class="page signin">
      <h1>Kiln</h1>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setBusy(true);
          setError(await props.onSignIn(token.trim()));
          setBusy(false);
        }}
      >
        <label for="token">Token</label>
        <input
          id="token"
          type="password"
          autocomplete="off"
          value={token}
          required
          aria-invalid={error !== null ? "true" : undefined}
          aria-describedby={error !== null ? "token-error" : undefined}
          onInput={(e) => setToken(e.currentTarget.value)}
        />
        {error !== null && (
          <p id="token-error" class="field-error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
