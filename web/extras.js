// The page's later parts, each in its own module: feedback on answers, the export and
// search of conversations, collections, the admin view, API keys and shared conversations.

import { initAdmin } from "./admin.js";
import { initCollections } from "./collections.js";
import { initFeedback } from "./feedback.js";
import { initKeys } from "./keys.js";
import { initSharedThreads } from "./shared_threads.js";
import { initThreadTools } from "./threads_tools.js";

initFeedback();
initThreadTools();
initCollections();
initAdmin();
initKeys();
initSharedThreads();
