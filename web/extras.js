// The page's later parts, each in its own module: feedback on answers, the export and
// search of conversations, collections, and the admin view.

import { initAdmin } from "./admin.js";
import { initCollections } from "./collections.js";
import { initFeedback } from "./feedback.js";
import { initThreadTools } from "./threads_tools.js";

initFeedback();
initThreadTools();
initCollections();
initAdmin();
