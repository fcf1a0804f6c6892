// The child process of killable.mjs: starts the Worker on the given state directory and prints
// READY <url>, then waits to be killed.
import { startWorker } from "./harness.mjs";

const { persistDir, apiToken, vars } = JSON.parse(process.env.SA_KILLABLE);
const w = await startWorker({ persistDir, apiToken, vars });
console.log(`READY ${w.url.href}`);
setInterval(() => {}, 60_000);
