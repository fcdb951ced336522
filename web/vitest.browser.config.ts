// Browser tests: Debian's chromium driven by playwright-core against a live
// `hearth serve` that web/test.sh starts (HEARTH_URL, HEARTH_TOKEN,
// HEARTH_ADMIN_TOKEN). One file at a time, one test at a time.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["e2e/**/*.e2e.ts"],
    environment: "node",
    fileParallelism: false,
    sequence: { concurrent: false },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["verbose"],
  },
});
