// The portal's shell: sign-in, then the pages the token's role may use. A
// tenant gets availability, the request form, its allocations and usage; an
// operator or admin also gets the fleet view.
import { useEffect, useState } from "preact/hooks";
import { Api } from "./api/client";
import { ApiError } from "./api/problem";
import { clearToken, loadToken, saveToken } from "./session";
import { Link, useRoute } from "./route";
import { SignIn } from "./components/SignIn";
import { Home } from "./components/Home";
import { AllocationPage } from "./components/AllocationPage";
import { Fleet } from "./components/Fleet";
import type { Who } from "./who";

export function App() {
  const [who, setWho] = useState<Who | null>(null);
  const [checking, setChecking] = useState(() => loadToken() !== null);
  const route = useRoute();

  const signIn = async (token: string): Promise<string | null> => {
    const api = new Api(token);
    try {
      const me = await api.whoami();
      saveToken(token);
      setWho({ api, role: me.role, tenant: me.tenant });
      return null;
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return "That token was not accepted. Check it and try again.";
      return e instanceof Error ? `Could not sign in: ${e.message}` : "Could not sign in.";
    }
  };

  useEffect(() => {
    const saved = loadToken();
    if (saved === null) return;
    void signIn(saved).then((err) => {
      if (err !== null) clearToken();
      setChecking(false);
    });
  }, []);

  if (who === null) {
    if (checking) return <main class="page"><p role="status">Signing in…</p></main>;
    return <SignIn onSignIn={signIn} />;
  }
  const staff = who.role !== "tenant";
  return (
    <>
      <header class="top">
        <span class="brand">Kiln</span>
        <nav aria-label="Main">
          <Link href="/">{staff ? "Capacity" : "My nodes"}</Link>
          {staff && <Link href="/fleet">Fleet</Link>}
        </nav>
        <span class="who">
          {who.role}
          {who.tenant !== null && <> · {who.tenant}</>}
        </span>
        <button
          type="button"
          class="secondary"
          onClick={() => {
            clearToken();
            setWho(null);
          }}
        >
          Sign out
        </button>
      </header>
      <main class="page">
        {route.page === "home" && <Home who={who} />}
        {route.page === "allocation" && <AllocationPage who={who} id={route.id} />}
        {route.page === "fleet" && (staff ? <Fleet who={who} /> : <p>The fleet view is for operators.</p>)}
      </main>
    </>
  );
}
