/** `node --import` entry: registers ./load-log-hooks.mjs with the file named by SVC_TEST_LOAD_LOG. */
import { register } from 'node:module';

register('./load-log-hooks.mjs', import.meta.url, { data: { file: process.env.SVC_TEST_LOAD_LOG } });
