/** The built-in protocols; each file registers itself. */
import './rot';
import './rclagent';
import './oracl';
import './knowledgemind/protocol';
import './rcaflow/protocol';
