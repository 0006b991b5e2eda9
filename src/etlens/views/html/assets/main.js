/* etlens viewer — entry point: build the app from the embedded payload and expose the hooks tests
 * and scripts use as window.etlens (window.etlensReady turns true after the first paint). */

import { App } from './app.js';

const app = new App(document);
window.etlens = app.hooks();
