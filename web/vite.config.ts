/// <reference types="vitest/config" />
// The console is served by `hearth serve` at /console/ from the same origin as
// the API. `npm run dev` serves it here and proxies the API to HEARTH_URL.
import { defineConfig } from "vite";

const api = process.env.HEARTH_URL ?? "http://127.0.0.1:8080";

export default defineConfig({
  base: "/console/",
  // Preact through the automatic JSX runtime: no framework plugin needed.
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    // The service's CSP allows no inline script; keep everything in files.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
  },
  server: {
    proxy: {
      "/v1": { target: api, changeOrigin: false },
      "/openapi.json": { target: api },
    },
  },
  test: {
    include: ["test/**/*.test.{ts,tsx}"],
    environment: "happy-dom",
    restoreMocks: true,
  },
});
