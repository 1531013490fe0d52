// Vite builds src/ into dist/, which kilnd serves at / (controller/api/portal.h):
// hashed names under assets/ (kilnd caches them as immutable), no inline
// script (kilnd's Content-Security-Policy forbids it), nothing from a CDN.
import { defineConfig } from "vite";

export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
  },
});
